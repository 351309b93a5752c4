"""What libkineto leaves of a trace it did not finish: `<file>.tmp`, opened when its profiler takes the request up
and written only after recording. Left empty: it refused to start (a start time already past when its profiler
thread got to the request) or its first write failed; left partial: a write failed (a full disk). libkineto logs
either on the process's stderr and takes later requests as before (kineto's output_json.cpp,
ActivityProfilerController.cpp; measured with torch 2.13 CPU)."""

from __future__ import annotations

from pathlib import Path

from dyno.diskspace import free_space_note
from dyno.trace_layout import kineto_tmp

__all__ = ["discard_unfinished_kineto_file"]

_EMPTY_KINETO_FILE = (
    "libkineto opens it when its profiler takes the request up and writes it only after recording, so either it "
    'refused to start ("Not starting tracing - start timestamp is in the past" on the process\'s stderr: its '
    "profiler got to the request after the start time, e.g. the process was stopped or short of CPU; trace again, "
    'with a longer --start-delay-s) or its write failed at once ("Failed to write to log file!": make room there and '
    "trace again)"
)
_FAILED_KINETO_WRITE = (
    'libkineto logs "Failed to write to log file!" on the process\'s stderr then and takes later requests as before: '
    "make room there and trace again"
)


def discard_unfinished_kineto_file(path: Path) -> str:
    """The reason to add when libkineto left `<path>.tmp` unfinished (see above: a failed write, e.g. on a full disk,
    or, when it is empty, a start libkineto refused as already past), with what to do; the partial file is removed.
    "" when there is none."""
    partial = kineto_tmp(path)
    try:
        empty = partial.stat().st_size == 0
        partial.unlink()
    except OSError:
        return ""
    note = free_space_note(path.parent)
    free = f"; {note}" if note else ""
    if empty:
        return f": libkineto's {partial} was left empty (removed it{free}): {_EMPTY_KINETO_FILE}"
    return f": libkineto's {partial} was never completed (a failed write? removed it{free}); {_FAILED_KINETO_WRITE}"

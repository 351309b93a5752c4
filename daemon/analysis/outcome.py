"""What a worker's end means: its exit and its output files (untrusted: the worker read traces anyone may have
written) made into the trace's summary, DONE or FAILED with the reason. Nothing a worker writes can harm dynod:
each file is read at most its bound, opened without following links, and checked field by field
(TraceSummary.from_json); anything else is BAD_OUTPUT."""

from __future__ import annotations

import json
import os
import signal
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from dyno.daemon.analysis.runner import LOG_FILE, WorkerExit
from dyno.daemon.analysis.work import AnalysisJob
from dyno.daemon.analysis.worker_main import (
    FAILURE_FILE,
    NO_TRACE_EXIT,
    OUT_OF_MEMORY_EXIT,
    PARTS_FILE,
    SUMMARY_FILE,
    THINNED_KEY,
)
from dyno.trace_summary import AnalysisFailure, AnalysisState, SummaryFormatError, TraceSummary

__all__ = ["MAX_PARTS_BYTES", "MAX_SUMMARY_BYTES", "Outcome", "outcome_of"]

MAX_SUMMARY_BYTES = 2**20  # a summary of 4096 ranks and 64 rules is ~1 MB of JSON at most
MAX_PARTS_BYTES = 3 * 2**20  # rank_parts, as the wire contract bounds it
_TAIL_BYTES = 600  # of the worker's log, in a crash's message
_MAX_JSON_DEPTH = 16  # to_json's documents are 3 levels deep: deeper is not one (and json's recursion is bounded)


class _Bad(Exception):
    """The worker's output is not what it must write."""


@dataclass(frozen=True)
class Outcome:
    summary: TraceSummary
    rank_parts: bytes = b""
    thinned: bool = False


def outcome_of(job: AnalysisJob, end: WorkerExit, now_ms: int) -> Outcome:
    """The analysis' result: the worker's summary with the daemon's fields (job, user, host, times, CPU) when it
    ended well; else FAILED with what went wrong. A worker ended by dynod's stop has no outcome (Analyses drops it)."""
    base = replace(job.summary(), analysis_cpu_s=end.cpu_s)
    if end.timed_out:
        return Outcome(base.failed(AnalysisFailure.TIMED_OUT, "the analysis ran past analysis_timeout_s", now_ms))
    if end.exit_code in (NO_TRACE_EXIT, OUT_OF_MEMORY_EXIT):
        failure = AnalysisFailure.NO_TRACE if end.exit_code == NO_TRACE_EXIT else AnalysisFailure.OUT_OF_MEMORY
        text = _read(end.out / FAILURE_FILE, 4096, tail=False).decode("utf-8", "replace").strip()
        return Outcome(base.failed(failure, text or failure.value.lower().replace("_", " "), now_ms))
    if end.exit_code != 0:
        return Outcome(base.failed(AnalysisFailure.CRASHED, _crash_text(end), now_ms))
    try:
        summary, thinned = _summary(end.out / SUMMARY_FILE, job.trace_id)
        parts = _read(end.out / PARTS_FILE, MAX_PARTS_BYTES)
        if parts and not parts.startswith(b"\x1f\x8b"):
            raise _Bad("rank_parts is not gzip data")
    except _Bad as e:
        return Outcome(base.failed(AnalysisFailure.BAD_OUTPUT, f"the analysis worker's output: {e}", now_ms))
    done = replace(
        summary,
        job_id=base.job_id,
        user=base.user,
        hostname=base.hostname,
        periodic=base.periodic,
        trace_finished_ms=base.trace_finished_ms,
        analysis_cpu_s=end.cpu_s,
        analyzed_ms=now_ms,
        state=AnalysisState.DONE,
        failure=AnalysisFailure.NONE,
        failure_message="",
        extra={},
    )
    return Outcome(done, parts, thinned)


def _crash_text(end: WorkerExit) -> str:
    if end.exit_code < 0:
        try:
            name = signal.Signals(-end.exit_code).name
        except ValueError:
            name = f"signal {-end.exit_code}"
        how = f"the analysis worker was killed by {name}"
        if -end.exit_code == signal.SIGXFSZ:
            how += " (its output passed its file size limit)"
        elif -end.exit_code == signal.SIGKILL:
            how += " (by the kernel's OOM killer when dynod's unit ran out of memory, or by someone)"
    else:
        how = f"the analysis worker exited with status {end.exit_code}"
    tail = _read(end.out / LOG_FILE, _TAIL_BYTES, tail=True).decode("utf-8", "replace").strip()
    last = tail.splitlines()[-1] if tail else ""
    return f"{how}: {last}" if last else how


def _read(path: Path, most: int, tail: bool = False) -> bytes:
    """At most `most` bytes of a plain file (the last ones with `tail`); _Bad when it is larger (not `tail`), not a
    plain file, or a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return b""
    except OSError as e:
        raise _Bad(f"{path.name}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _Bad(f"{path.name} is not a plain file")
        if st.st_size > most and not tail:
            raise _Bad(f"{path.name} has {st.st_size} bytes, more than {most}")
        if tail and st.st_size > most:
            os.lseek(fd, st.st_size - most, os.SEEK_SET)
        return os.read(fd, most)
    finally:
        os.close(fd)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _depth(v: object, level: int = 0) -> int:
    if level > _MAX_JSON_DEPTH:
        return level
    if isinstance(v, dict):
        return max((_depth(x, level + 1) for x in v.values()), default=level)
    if isinstance(v, list):
        return max((_depth(x, level + 1) for x in v), default=level)
    return level


def _summary(path: Path, trace_id: str) -> tuple[TraceSummary, bool]:
    data = _read(path, MAX_SUMMARY_BYTES)
    if not data:
        raise _Bad(f"no {path.name}")
    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
        if _depth(doc) > _MAX_JSON_DEPTH:
            raise ValueError("nested too deep")
        summary = TraceSummary.from_json(doc)
    except SummaryFormatError as e:
        raise _Bad(f"{path.name}: {e}") from None
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError and json's errors are ValueErrors
        raise _Bad(f"{path.name} is not JSON: {str(e)[:200]}") from None
    if summary.trace_id != trace_id:
        raise _Bad(f"{path.name} is of trace {summary.trace_id!r}, not {trace_id!r}")
    thinned = summary.extra.get(THINNED_KEY, False)
    if not isinstance(thinned, bool):
        raise _Bad(f"{path.name}: {THINNED_KEY}: expected true/false")
    return summary, thinned

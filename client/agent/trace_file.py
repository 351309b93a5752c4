"""Writing the trace file: the profiler's JSON export copied with the request's trace id embedded, gzip-compressed,
atomically (temp name, then rename), streaming, optionally filtered line by line (flops)."""

from __future__ import annotations

import gzip
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from dyno.client.agent.output import OutputFiles, TraceAbandoned, unlink_quietly
from dyno.client.agent.spec import TraceFailed

__all__ = ["GZIP_LEVEL", "write_trace_file", "check_output_dir"]

_CHUNK_BYTES = 1024 * 1024
# gzip's own default, not Python's gzip.open default of 9: measured on a 2.7 MB export (with_stack, record_shapes) on
# this 2-core VM, level 9 compressed at 7.6 MB/s (ratio 12.9), level 6 at 24 MB/s (11.8), level 1 at 68 MB/s (8.8).
# The copy runs in the trainer while it trains: at 9 a 1 GB export kept one of its cores busy for ~2 minutes
# (and the trace file arrived that much later) for files ~9% smaller than at 6.
GZIP_LEVEL = 6
_HEAD_BYTES = 64 * 1024  # kineto writes its metadata (incl. "trace_id") in the first few hundred bytes
_TRACE_ID_KEY = re.compile(rb'"trace_id"\s*:\s*"(?:[^"\\]|\\.)*"')


def _with_trace_id(head: bytes, trace_id: str) -> bytes:
    """The JSON head with its top-level "trace_id" set to trace_id (replaced if kineto wrote one, else inserted
    after the opening brace)."""
    value = b'"trace_id": "' + trace_id.encode().replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'
    events_at = head.find(b'"traceEvents"')
    header = head if events_at < 0 else head[:events_at]
    match = _TRACE_ID_KEY.search(header)
    if match:
        return head[: match.start()] + value + head[match.end() :]
    brace = head.find(b"{")
    if brace < 0:
        raise TraceFailed("profiler export is not a JSON object")
    rest = head[brace + 1 :]
    sep = b"" if rest.lstrip().startswith(b"}") else b", "
    return head[: brace + 1] + value + sep + rest


def write_trace_file(
    raw_json: Path,
    output: Path,
    trace_id: str,
    files: OutputFiles | None = None,
    line_filter: Callable[[bytes], bytes] | None = None,
) -> int:
    """Copy the profiler's JSON export to `output` with trace_id embedded, gzip-compressed when `output` ends in
    .gz, atomically (`<output>.tmp`, then rename), streaming. Returns the final size in bytes. With `files`, nothing
    is created or renamed once they were abandoned (TraceFailed). `line_filter` rewrites the export, given whole lines
    (blocks of them; e.g. flops.FlopArgs); without it the bytes are copied as they are."""
    files = files or OutputFiles(output)
    tmp = files.tmp
    try:
        with open(raw_json, "rb") as src:
            head = src.read(_HEAD_BYTES)
            if line_filter is not None:
                head += src.readline()  # whole lines only, for the filter
            head = _with_trace_id(head, trace_id)
            with files.creating():
                dst = gzip.open(tmp, "wb", GZIP_LEVEL) if output.name.endswith(".gz") else open(tmp, "wb")
            with dst:
                if line_filter is None:
                    dst.write(head)
                    shutil.copyfileobj(src, dst, _CHUNK_BYTES)
                else:  # in large blocks of whole lines: a write per line made the copy ~15x slower
                    dst.write(line_filter(head))
                    while block := src.read(_CHUNK_BYTES):
                        dst.write(line_filter(block + src.readline()))
        with files.creating():
            os.replace(tmp, output)
    except TraceAbandoned as e:
        raise TraceFailed(str(e)) from e
    except OSError as e:
        unlink_quietly(tmp)
        raise TraceFailed(f"cannot write {output}: {e.strerror or e}") from e
    return output.stat().st_size


def check_output_dir(output: Path) -> None:
    # Fail before profiling: a trace that cannot be written is not worth slowing the trainer for.
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TraceFailed(f"output directory {output.parent} cannot be created: {e.strerror or e}") from e
    if not os.access(output.parent, os.W_OK | os.X_OK):
        raise TraceFailed(f"output directory {output.parent} is not writable by uid {os.geteuid()}")

"""What a finished libkineto trace file tells about an iteration request: whether libkineto recorded the iterations
asked for or fell back to its default 500 ms window.

libkineto counts iterations by `optimizer.step()` calls (torch's optimizer step post-hook); a program with no
optimizer, or one that has not stepped yet, silently turns an iteration config into a 500 ms duration trace and the
file looks complete (KINETO_IPC.md, "Iterations"). The file shows it: the recording window, between its two global
instant markers `Iteration Start: PyTorch Profiler` and `Record Window End` (written last, in the file's tail), lasts
500 ms, and it holds fewer `Optimizer.step#...` annotations than iterations requested (an N-iteration window holds N:
checked with torch 2.13 CPU). The window is read from the tail first (cheap), the whole file is scanned only when
the window is that long, so a normal iteration trace costs one small read.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from dyno.daemon.tracing.trust import open_trace_file

__all__ = [
    "KINETO_DEFAULT_DURATION_MS",
    "RecordWindow",
    "record_window",
    "count_optimizer_steps",
    "iteration_fallback_note",
]

log = logging.getLogger(__name__)

KINETO_DEFAULT_DURATION_MS = 500  # libkineto's ACTIVITIES_DURATION_MSECS default, what it records instead
# A window this long is checked further: 500 ms as written on an idle host, later stops on a loaded one.
_FALLBACK_WINDOW_MS = (0.9 * KINETO_DEFAULT_DURATION_MS, 3 * KINETO_DEFAULT_DURATION_MS)
TAIL_BYTES = 256 * 1024  # the markers follow the events, among the metadata (a few KB on CPU, more with GPUs)
_START_MARK = re.compile(rb'"name":\s*"Iteration Start: PyTorch Profiler"')
_END_MARK = re.compile(rb'"name":\s*"Record Window End"')
_STEP_MARK = re.compile(rb'"name":\s*"Optimizer\.step#')
_CARRY = 64  # longer than a step mark: one split between two chunks is found in the next
_TS = re.compile(rb'"ts":\s*(-?[0-9]+(?:\.[0-9]+)?)')
_CHUNK = 1 << 20


@dataclass(frozen=True)
class RecordWindow:
    start_us: float
    end_us: float

    @property
    def duration_ms(self) -> float:
        return (self.end_us - self.start_us) / 1000


def _marker_ts(tail: bytes, mark: re.Pattern[bytes]) -> float | None:
    found = list(mark.finditer(tail))
    if not found:
        return None
    at = found[-1].start()  # the last one (a file holds one of each)
    # The marker's own event object: from its opening brace to its closing one (instant events hold no nesting).
    begin, end = tail.rfind(b"{", 0, at), tail.find(b"}", at)
    m = _TS.search(tail, begin if begin >= 0 else 0, end if end >= 0 else len(tail))
    return float(m.group(1)) if m else None


def record_window(path: Path, *, tail_bytes: int = TAIL_BYTES) -> RecordWindow | None:
    """The recording window from the file's tail; None when unreadable or the markers are not there."""
    try:
        with open_trace_file(path) as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - tail_bytes))
            tail = f.read()
    except OSError as e:
        log.debug("kineto file %s: cannot read its tail: %s", path, e)
        return None
    start, end = _marker_ts(tail, _START_MARK), _marker_ts(tail, _END_MARK)
    if start is None or end is None or end < start:
        return None
    return RecordWindow(start, end)


def count_optimizer_steps(path: Path) -> int | None:
    """How many `Optimizer.step#<Class>.step` annotations the file holds (one per step recorded); None when
    unreadable. Reads the file in chunks (it may be large), overlapping so a name split between two is counted."""
    count, carry = 0, b""
    try:
        with open_trace_file(path) as f:
            while chunk := f.read(_CHUNK):
                data, counted_to = carry + chunk, 0
                for m in _STEP_MARK.finditer(data):
                    count, counted_to = count + 1, m.end()
                carry = data[max(counted_to, len(data) - _CARRY) :]  # never a mark counted already
    except OSError as e:
        log.debug("kineto file %s: cannot read it: %s", path, e)
        return None
    return count


def iteration_fallback_note(path: Path, iterations: int) -> str:
    """A note for the done trace when libkineto recorded its 500 ms fallback window instead of `iterations`
    optimizer steps; "" when the file holds the iterations (or cannot tell)."""
    window = record_window(path)
    if window is not None and not _FALLBACK_WINDOW_MS[0] <= window.duration_ms <= _FALLBACK_WINDOW_MS[1]:
        return ""
    steps = count_optimizer_steps(path)
    if steps is None or steps >= iterations:
        return ""
    span = f"a {window.duration_ms:.0f} ms window" if window is not None else "a time window"
    return (
        f"not {iterations} iteration(s): libkineto counts iterations by optimizer.step() calls and records a "
        f"~{KINETO_DEFAULT_DURATION_MS} ms window instead when the program makes none (no optimizer, or not "
        f"training yet); this file holds {span} with {steps} optimizer step(s)"
    )

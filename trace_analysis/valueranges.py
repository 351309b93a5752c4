"""Whether a loaded trace's times are ones a profiler can write, checked once after the load.

Why: a timestamp of 1e308 µs (or ±1e30) is valid JSON and a valid float, but every analysis then works on spans
of 1e302 s: numpy overflows into inf and NaN (warnings with source lines on stderr, "nan%" findings, NaN cast to
nonsense GPU ids), or reports a span of 3e24 s without a word. Kineto writes microseconds since the epoch (about
1.7e15 today) or since the trace's start; anything past ±2**53 µs (285 years, where a float64 stops holding whole
microseconds) is corruption, and such a file is refused with what is wrong, where, and how often.
"""

from __future__ import annotations

import numpy as np

from dyno.trace_analysis.model import Trace

__all__ = ["TS_LIMIT_US", "out_of_range_reason"]

# the largest |time| in µs a trace may hold (ts, and ts + dur of complete events)
TS_LIMIT_US = float(2**53)


def _bad(values: np.ndarray) -> np.ndarray:
    """Rows whose value is beyond the limit (NaN counts as fine here: the loader drops non-numeric times)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.flatnonzero(np.abs(values) > TS_LIMIT_US)


def _within(trace: Trace) -> bool:
    """Whether every time is in range, from the ends of the ts-sorted tables and the longest duration (a few
    scalar reads: the check costs nothing on a good trace)."""
    for table in (trace.events, trace.flows, trace.instants, trace.memory):
        if len(table) and not (-TS_LIMIT_US <= float(table.ts[0]) and float(table.ts[-1]) <= TS_LIMIT_US):
            return False
    ev = trace.events
    return not len(ev) or float(ev.ts[-1]) + float(ev.dur.max()) <= TS_LIMIT_US


def out_of_range_reason(trace: Trace) -> str | None:
    """Why ``trace`` holds times no profiler writes (which field of which events, how many, an example); None if
    none does."""
    if _within(trace):
        return None
    ev = trace.events
    checks: list[tuple[str, str, np.ndarray, np.ndarray]] = []  # (field, kind of event, values, bad rows)
    if len(ev):
        checks.append(("ts", "complete", ev.ts, _bad(ev.ts)))
        with np.errstate(invalid="ignore", over="ignore"):
            end = ev.ts + ev.dur
        checks.append(("dur", "complete", ev.dur, np.setdiff1d(_bad(end), checks[0][3], assume_unique=True)))
    for field, kind, table in (("ts", "flow", trace.flows), ("ts", "instant", trace.instants)):
        if len(table):
            checks.append((field, kind, table.ts, _bad(table.ts)))
    if len(trace.memory):
        checks.append(("ts", "[memory]", trace.memory.ts, _bad(trace.memory.ts)))
    problems = []
    for field, kind, values, rows in checks:
        if not len(rows):
            continue
        n = len(rows)
        row = int(rows[0])
        example = f"ts={values[row]:g}"
        if kind == "complete":
            example = f"{trace.strings[int(ev.name[row])]!r} with ts={ev.ts[row]:g}"
            if field == "dur":
                example += f", dur={ev.dur[row]:g}"
        what = "ts + dur" if field == "dur" else field
        problems.append(
            f"{n} {kind} event{'' if n == 1 else 's'} with {what} beyond ±{TS_LIMIT_US:.1e} µs (e.g. {example})"
        )
    if not problems:
        return None
    return (
        "times out of range: "
        + "; ".join(problems)
        + " (times are microseconds, about 1.7e15 since the epoch; the file is corrupt or not from a profiler)"
    )

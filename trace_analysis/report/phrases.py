"""Phrases the text and HTML reports share about a finding: its cost and where its examples are.

One place, so that both reports say the same thing: "lost 12.3 ms (4.5% of window)", "no time lost (GPU busy
98% (GPU-bound): ...)" when a rule judged there is none, "time lost not measurable" when a trace cannot tell;
and an example at "+1.234 s (ts=1694039994139319)": its offset from the rank's trace start, then the absolute
timestamp to search for in Perfetto.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..rules.base import Evidence, Example, Finding, count_of
from ..units import fmt_ts, fmt_us
from .model import HostTime, StepStats

__all__ = ["cost_text", "example_at", "fmt_offset", "host_time_text", "overlap_note", "steps_text"]

# rules whose time lost is GPU idle time: on one rank they count the same idle (alexnet: 12.86 s, 12.85 s and
# 12.73 s, three views of one 12.9 s idle GPU span). exposed-comm's is not idle: communication kernels run (GPU
# busy), so it is disjoint from the device-idle rules' (negative_queue: 692.8 ms idle + 162.0 ms exposed, which do
# add up) and overlaps only host-bound's, whose compute stream idles while the communication runs.
_GPU_IDLE_RULES = ("low-gpu-util", "host-bound", "gpu-starvation", "exposed-comm", "sync-calls")
_COMM_RULE, _COMPUTE_STREAM_RULE = "exposed-comm", "host-bound"


def fmt_offset(us: float) -> str:
    """An offset from the trace start, precise enough to find the event on a timeline: +1.234 s, +12.345 ms,
    +850 µs (fmt_us's one decimal of ms or two of s would put it anywhere in a 100 µs or 10 ms range)."""
    sign = "-" if us < 0 else "+"
    a = abs(us)
    if a >= 1e6:
        return f"{sign}{a / 1e6:.3f} s"
    if a >= 1e3:
        return f"{sign}{a / 1e3:.3f} ms"
    return f"{sign}{fmt_us(a)}"


def example_at(ex: Example) -> str:
    """Where an example is: "+1.234 s (ts=1694039994139319)", or "ts=..." when its offset is unknown."""
    ts = f"ts={fmt_ts(ex.ts_us)}"
    return ts if ex.offset_us is None else f"{fmt_offset(ex.offset_us)} ({ts})"


def overlap_note(findings: Sequence[Finding]) -> str | None:
    """A line under the findings header when two or more findings of one rank count the same time (their time
    lost does not add up), naming those rules; else None."""
    by_rank: dict[int | None, set[str]] = {}
    for f in findings:
        if f.rule_id in _GPU_IDLE_RULES and f.evidence.time_lost_us > 0:
            by_rank.setdefault(f.rank, set()).add(f.rule_id)
    overlapping: set[str] = set()
    for ids in by_rank.values():
        idle = ids - {_COMM_RULE}
        if len(idle) > 1:
            overlapping |= idle
        if _COMM_RULE in ids and _COMPUTE_STREAM_RULE in ids:
            overlapping |= {_COMM_RULE, _COMPUTE_STREAM_RULE}
    rules = [r for r in _GPU_IDLE_RULES if r in overlapping]
    if not rules:
        return None
    named = ", ".join(rules[:-1]) + f" and {rules[-1]}"
    what = "GPU idle time"
    if _COMM_RULE in rules:
        what = "time (GPU idle, or the compute stream idle while communication runs)"
    return f"time lost overlaps: {named} count the same {what} on a rank; do not add them up"


def cost_text(e: Evidence) -> str:
    """The cost line of a finding, without its share: a measured loss, none (and why), or not measurable."""
    if e.time_lost_us > 0:
        return f"lost {fmt_us(e.time_lost_us)}"
    if e.no_time_lost_reason:
        return f"no time lost ({e.no_time_lost_reason})"
    return "time lost not measurable"


def steps_text(s: StepStats) -> str:
    """Where the steps come from, with the markers counted as the findings count them: "5 steps from profiler
    step markers"; "4 steps between 5 optimizer.step calls" (a step runs from one call's end to the next's); an
    iteration trace, whose first step runs from the profiler's start: "5 steps ending at 5 optimizer.step
    calls: an iteration trace"."""
    if s.source == "optimizer":
        calls = count_of(s.markers, "optimizer.step call")
        if s.count == s.markers:
            return f"{count_of(s.count, 'step')} ending at {calls}: an iteration trace"
        return f"{count_of(s.count, 'step')} between {calls}"
    return f"{count_of(s.count, 'step')} from {s.source.replace('_', ' ')} markers"


def host_time_text(h: HostTime) -> str:
    """Where the window's host time went: "host time in the window (273.0 ms): CPU ops 72.3%, other traced
    regions 2.0%, nothing traced 25.7% (...)"."""
    return (
        f"host time in the window ({fmt_us(h.window_us)}): CPU ops {100 * h.share(h.ops_us):.1f}% (any thread), "
        f"other traced regions {100 * h.share(h.other_traced_us):.1f}% (annotations, Python frames, runtime calls "
        f"outside ops), nothing traced {100 * h.share(h.untraced_us):.1f}% (Python between ops, sleeps, I/O, "
        "waits: the profiler records none of them)"
    )

"""Phrases the text and HTML reports share about a finding: its cost and where its examples are.

One place, so that both reports say the same thing: "lost 12.3 ms (4.5% of window)", "no time lost (GPU busy
98% (GPU-bound): ...)" when a rule judged there is none, "time lost not measurable" when a trace cannot tell;
and an example at "+1.234 s (ts=1694039994139319)": its offset from the rank's trace start, then the absolute
timestamp to search for in Perfetto.
"""

from __future__ import annotations

from ..rules.base import Evidence, Example
from ..units import fmt_ts, fmt_us

__all__ = ["cost_text", "example_at", "fmt_offset"]


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


def cost_text(e: Evidence) -> str:
    """The cost line of a finding, without its share: a measured loss, none (and why), or not measurable."""
    if e.time_lost_us > 0:
        return f"lost {fmt_us(e.time_lost_us)}"
    if e.no_time_lost_reason:
        return f"no time lost ({e.no_time_lost_reason})"
    return "time lost not measurable"

"""gpu-starvation counts GPU idle time inside the analysed window only, as every other rule's time lost.

Gaps after the last profiler step (the profiler flushing, a checkpoint after the loop) counted whole: a fully
busy 400 ms window with one late kernel 1.1 s later reported "lost 1.10 s (275.0% of window)", high."""

from __future__ import annotations

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze

pytestmark = pytest.mark.unit


def _trace(tmp_path, busy_until_us: float, late_us: float):
    b = TraceBuilder()
    for i in range(2):
        b.step(i, i * 500_000.0, 500_000.0)  # window: [0, 1 s)
    t = 0.0
    while t < busy_until_us:
        b.launch("k", t, t + 10.0, 1000.0)
        t += 1000.0
    b.launch("late", late_us, late_us + 10.0, 100.0)
    return b.write(tmp_path / "t.json")


def test_idle_after_the_window_is_not_starvation(tmp_path):
    report = analyze(_trace(tmp_path, 1_000_000.0, 2_500_000.0), rules=["gpu-starvation"])
    assert report.findings_of("gpu-starvation") == []


def test_gap_crossing_the_window_end_counts_its_part_inside(tmp_path):
    report = analyze(_trace(tmp_path, 200_000.0, 2_500_000.0), rules=["gpu-starvation"])
    (f,) = report.findings_of("gpu-starvation")
    assert f.evidence.time_lost_us == pytest.approx(1_000_000.0 - 200_010.0)
    assert f.evidence.share == pytest.approx(0.79999, abs=1e-4) and f.evidence.share <= 1.0
    assert f.evidence.examples[0].ts_us == pytest.approx(200_010.0)

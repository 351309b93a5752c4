"""launch-queue: the title's median and longest delay (of the delayed launches) are in the JSON counts too, beside
the median of every launch."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze

pytestmark = pytest.mark.unit


def _trace(tmp_path: Path, late_us: float) -> Path:
    """20 launches; 8 of them run ``late_us`` after their call ends, the others 5 µs after."""
    b = TraceBuilder()
    for i in range(20):
        t = i * 10_000.0
        b.launch("k", t, t + 5.0 + (late_us if i % 5 < 2 else 5.0), 20.0)
    return b.write(tmp_path / "t.json")


def test_counts_carry_the_titles_delays(tmp_path: Path) -> None:
    (f,) = analyze([_trace(tmp_path, 1_000.0)], rules=["launch-queue"]).findings_of("launch-queue")
    c = f.evidence.counts
    assert "median delay 1.0 ms, longest 1.0 ms" in f.title
    assert c["delayed_median_delay_us"] == pytest.approx(1_000.0) and c["max_delay_us"] == pytest.approx(1_000.0)
    assert c["median_delay_us"] == pytest.approx(5.0)  # of every launch, as before
    assert c["delayed_launches"] == 8


def test_no_finding_without_delays(tmp_path: Path) -> None:
    assert analyze([_trace(tmp_path, 5.0)], rules=["launch-queue"]).findings_of("launch-queue") == []

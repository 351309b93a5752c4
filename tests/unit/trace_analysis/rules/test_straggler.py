"""straggler: its time lost is over the whole window, like every other rule's, so findings sort and grade fairly."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.rules import Severity

pytestmark = pytest.mark.unit


def _ranks(folder: Path, step_us: list[float], steps: int = 3) -> Path:
    for r, d in enumerate(step_us):
        b = TraceBuilder(rank=r, world_size=len(step_us))
        for i in range(steps):
            b.step(i, i * d, d)
        b.busy_gpu(0.0, 5)
        b.write(folder / f"rank-{r}.json")
    return folder


def test_straggler_time_lost_counts_every_step(tmp_path):
    # rank 4 is 50% slower in each of its 3 steps: it loses 3 x (150 - 100.5) ms, a third of its window.
    # It used to report one step's excess (49.5 ms, "11% of window", medium) against the 3-step window.
    report = analyze(_ranks(tmp_path, [100_000, 101_000, 99_000, 100_500, 150_000]), rules=["straggler"])
    (f,) = report.findings_of("straggler")
    assert f.rank == 4
    assert f.evidence.time_lost_us == pytest.approx(3 * (150_000 - 100_500))
    assert f.evidence.share == pytest.approx(3 * 49_500 / 450_000)
    assert f.severity is Severity.HIGH


def test_straggler_time_lost_over_five_steps(tmp_path):
    # 5 steps of 60 ms extra each: 300 ms lost over the window (was 60 ms)
    folder = _ranks(tmp_path, [200_000, 200_000, 260_000], steps=5)
    report = analyze(folder, rules=["straggler"])
    (f,) = report.findings_of("straggler")
    assert f.rank == 2 and f.evidence.time_lost_us == pytest.approx(5 * 60_000)


def test_two_ranks_without_collectives_flag_nothing(tmp_path):
    # as documented: each of two ranks is exactly one MAD from their median, so the step-time test cannot
    # single one out (the docs used to say the min_excess floor would let it fire)
    report = analyze(_ranks(tmp_path, [100_000, 300_000]), rules=["straggler"])
    assert report.findings_of("straggler") == []
    assert [o.reason for o in report.rules] == ["compared 2 ranks"]

"""straggler: its time lost is over the whole window, like every other rule's, so findings sort and grade fairly;
on ranks whose traces cover different spans, the collective wait is a share of the waiting ranks' window."""

from __future__ import annotations

import json
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
    report = analyze(_ranks(tmp_path, [100_000, 101_000, 99_000, 100_500, 150_000]), rules=["straggler"])
    (f,) = report.findings_of("straggler")
    assert f.rank == 4
    assert f.evidence.time_lost_us == pytest.approx(3 * (150_000 - 100_500))
    assert f.evidence.share == pytest.approx(3 * 49_500 / 450_000)
    assert f.severity is Severity.HIGH


def test_straggler_time_lost_over_five_steps(tmp_path):
    # 5 steps of 60 ms extra each: 300 ms lost over the window, not one step's 60 ms
    folder = _ranks(tmp_path, [200_000, 200_000, 260_000], steps=5)
    report = analyze(folder, rules=["straggler"])
    (f,) = report.findings_of("straggler")
    assert f.rank == 2 and f.evidence.time_lost_us == pytest.approx(5 * 60_000)


def test_two_ranks_without_collectives_flag_nothing(tmp_path):
    # as documented: each of two ranks is exactly one MAD from their median, so the step-time test cannot
    # single one out
    report = analyze(_ranks(tmp_path, [100_000, 300_000]), rules=["straggler"])
    assert report.findings_of("straggler") == []
    assert [o.reason for o in report.rules] == ["compared 2 ranks"]


# straggler on ranks whose traces cover different spans


def _rank(path: Path, rank: int, step: tuple[float, float], gloo: tuple[float, float]) -> None:
    pid = 100 + rank

    def x(name: str, cat: str, ts: float, dur: float, tid: int = pid) -> dict:
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid}

    events = [
        x("ProfilerStep#3", "user_annotation", step[0], step[1] - step[0]),
        x("aten::mm", "cpu_op", step[0] + 10, 50),
        x("gloo:all_reduce", "user_annotation", gloo[0], gloo[1] - gloo[0], tid=pid + 1),
    ]
    doc = {"distributedInfo": {"backend": "gloo", "rank": rank, "world_size": 2}, "traceEvents": events}
    path.write_text(json.dumps(doc))


def test_wait_share_is_over_the_waiting_ranks_window(tmp_path: Path) -> None:
    # rank 0 traced 11 ms and waited 10.3 ms in all_reduce for rank 1, whose cycle covers only its last 2 ms
    _rank(tmp_path / "a.json", 0, (0.0, 11_000.0), (500.0, 10_800.0))
    _rank(tmp_path / "b.json", 1, (9_000.0, 11_000.0), (10_500.0, 10_800.0))
    (f,) = analyze(tmp_path, rules=["straggler"]).findings_of("straggler")
    assert f.rank == 1
    assert f.evidence.time_lost_us == pytest.approx(10_000.0)
    assert f.evidence.share == pytest.approx(10_000.0 / 11_000.0)  # not / 6_500 (the median of both windows)
    assert "(91% of their traced window)" in f.title


def test_equal_windows_keep_the_same_share(tmp_path: Path) -> None:
    # both ranks cover the same 11 ms: the others' window is the median window, as before
    _rank(tmp_path / "a.json", 0, (0.0, 11_000.0), (500.0, 10_800.0))
    _rank(tmp_path / "b.json", 1, (0.0, 11_000.0), (10_500.0, 10_800.0))
    (f,) = analyze(tmp_path, rules=["straggler"]).findings_of("straggler")
    assert f.rank == 1 and f.evidence.share == pytest.approx(10_000.0 / 11_000.0)
    assert 0.0 <= f.evidence.share <= 1.0


def test_no_wait_no_straggler(tmp_path: Path) -> None:
    _rank(tmp_path / "a.json", 0, (0.0, 11_000.0), (10_500.0, 10_800.0))
    _rank(tmp_path / "b.json", 1, (9_000.0, 11_000.0), (10_500.0, 10_800.0))
    assert analyze(tmp_path, rules=["straggler"]).findings_of("straggler") == []

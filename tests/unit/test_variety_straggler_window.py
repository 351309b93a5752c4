"""straggler on ranks whose traces cover different spans: the collective wait is a share of the *waiting* ranks'
window. With the straggler's own short window in the median (a rank that started its profiling cycle late: the
very cause of the wait), a real 2-rank gloo trace reported "lost 10.0 ms (495.8% of window)"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dyno.trace_analysis import analyze

pytestmark = pytest.mark.unit


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
    assert f.evidence.share == pytest.approx(10_000.0 / 11_000.0)  # was 10_000 / 6_500 (median of both windows)
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

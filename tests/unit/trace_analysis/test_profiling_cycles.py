"""Several files of one process in a folder are profiling cycles (torch.profiler ``schedule(repeat=N)`` with
``tensorboard_trace_handler``: one ``<worker>.<ns>.pt.trace.json`` per cycle), not several ranks: the latest
cycle is analysed and each earlier one reported (not ranks of one job, nor "duplicate rank" errors)."""

from __future__ import annotations

import gzip
import json
import shutil
import warnings
from pathlib import Path

import pytest

from dyno.trace_analysis import analyze
from dyno.trace_analysis.loader import load_traces
from dyno.trace_analysis.report.text import render_text

pytestmark = pytest.mark.unit


def _doc(t0: float, *, rank: int | None = None, host: str | None = "h1", pid: int = 7, n: int = 1) -> dict:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": t0 + 100 * i, "dur": 50, "pid": pid, "tid": pid}
        for i in range(n)
    ]
    doc: dict = {"traceEvents": events, "baseTimeNanoseconds": 1_700_000_000_000_000_000}
    if host is not None:
        doc["host_name"] = host
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}
    return doc


def _write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def cycles_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real torch.profiler run: schedule(active=1, repeat=3) with tensorboard_trace_handler, three files."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    folder = tmp_path_factory.mktemp("cycles")
    lin = torch.nn.Linear(16, 16)
    with warnings.catch_warnings():  # "Profiler clears events at the end of each cycle": what is tested here
        warnings.simplefilter("ignore", UserWarning)
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=0, warmup=1, active=1, repeat=3),
            on_trace_ready=tensorboard_trace_handler(str(folder), worker_name="w0", use_gzip=True),
        ) as prof:
            for _ in range(7):
                lin(torch.randn(4, 16)).sum().backward()
                prof.step()
    return folder


def test_real_schedule_repeat_folder_is_one_process_not_three_ranks(cycles_folder: Path) -> None:
    files = sorted(cycles_folder.glob("w0.*.pt.trace.json.gz"))
    assert len(files) == 3
    m = load_traces(cycles_folder)
    assert m.ranks == [0]
    kept = Path(m[0].meta.path)
    assert kept == max(files, key=lambda f: load_traces(f)[0].span[0])  # the latest cycle
    assert sorted(Path(e.path) for e in m.errors) == sorted(f for f in files if f != kept)
    for e in m.errors:
        assert e.reason.startswith("an earlier profiling cycle of process ")
        assert f"the latest cycle, {kept.name}, is analysed" in e.reason
    report = analyze(cycles_folder)
    (rank,) = report.ranks
    assert rank.steps is not None and rank.steps.count == 1  # schedule(active=1): one ProfilerStep per file
    assert report.findings_of("straggler") == []
    text = render_text(report)
    for e in m.errors:
        assert f"skipped {e.path}: an earlier profiling cycle of process" in text  # not "could not load"


def test_real_trace_and_its_gzip_copy_are_one_recording(cycles_folder: Path, tmp_path: Path) -> None:
    src = sorted(cycles_folder.glob("*.gz"))[0]
    plain = tmp_path / src.name[: -len(".gz")]
    plain.write_bytes(gzip.decompress(src.read_bytes()))
    shutil.copy(src, tmp_path / src.name)
    m = load_traces(tmp_path)
    assert m.ranks == [0] and Path(m[0].meta.path) == plain
    (e,) = m.errors
    assert Path(e.path) == tmp_path / src.name and e.reason.startswith(f"the same recording as {plain}")


def _two_cycles_per_rank(d: Path, rank1_ahead_us: int) -> None:
    """Rank 0's cycles at 0 and 10,000 µs (a.json, b.json), rank 1's (pid 8) as much later by its clock (c.json,
    d.json)."""
    _write(d / "a.json", _doc(0, rank=0))
    _write(d / "b.json", _doc(10_000, rank=0))
    _write(d / "c.json", _doc(rank1_ahead_us, rank=1, pid=8))
    _write(d / "d.json", _doc(10_000 + rank1_ahead_us, rank=1, pid=8))


def test_distributed_cycles_keep_the_latest_per_rank(tmp_path: Path) -> None:
    _two_cycles_per_rank(tmp_path, rank1_ahead_us=5)
    m = load_traces(tmp_path)
    assert m.ranks == [0, 1]
    assert [Path(m[r].meta.path).name for r in (0, 1)] == ["b.json", "d.json"]
    assert [(Path(e.path).name, e.reason.split(" (")[0]) for e in m.errors] == [
        ("a.json", "an earlier profiling cycle of rank 0"),
        ("c.json", "an earlier profiling cycle of rank 1"),
    ]


def test_a_rank_with_fewer_cycles_sets_the_cycle_every_rank_is_compared_over(tmp_path: Path) -> None:
    # rank 1 stopped after the first cycle: rank 0's second cycle has nothing to be compared with
    _write(tmp_path / "a.json", _doc(0, rank=0))
    _write(tmp_path / "b.json", _doc(10_000, rank=0))
    _write(tmp_path / "c.json", _doc(5, rank=1, pid=8))
    m = load_traces(tmp_path)
    assert m.ranks == [0, 1]
    assert [Path(m[r].meta.path).name for r in (0, 1)] == ["a.json", "c.json"]
    (e,) = m.errors
    assert Path(e.path).name == "b.json"
    assert e.reason.startswith("a later profiling cycle of rank 0 than another rank's last file")
    assert "the ranks are compared over the latest cycle every rank has, a.json;" in e.reason


def test_earlier_cycles_before_an_aligned_one_name_it(tmp_path: Path) -> None:
    for j, t0 in enumerate((0, 10_000, 20_000)):
        _write(tmp_path / f"r0_{j}.json", _doc(t0, rank=0))
    for j, t0 in enumerate((5, 10_005)):
        _write(tmp_path / f"r1_{j}.json", _doc(t0, rank=1, pid=8))
    m = load_traces(tmp_path)
    assert [Path(m[r].meta.path).name for r in (0, 1)] == ["r0_1.json", "r1_1.json"]
    reasons = {Path(e.path).name: e.reason for e in m.errors}
    assert "the latest cycle every rank has, r0_1.json, is analysed" in reasons["r0_0.json"]
    assert reasons["r0_2.json"].startswith("a later profiling cycle of rank 0")
    assert "the latest cycle, r1_1.json, is analysed" in reasons["r1_0.json"]


def test_overlapping_files_of_one_rank_stay_duplicates(tmp_path: Path) -> None:
    _write(tmp_path / "a.json", _doc(0, rank=0, n=3))
    _write(tmp_path / "b.json", _doc(100, rank=0, n=3))  # overlaps a.json: not a later cycle
    m = load_traces(tmp_path)
    assert m.ranks == [0] and Path(m[0].meta.path).name == "a.json"
    (e,) = m.errors
    assert e.reason.startswith("duplicate rank 0")


def test_different_processes_are_still_ranks(tmp_path: Path) -> None:
    _write(tmp_path / "a.json", _doc(0, pid=7))
    _write(tmp_path / "b.json", _doc(10_000, pid=9))  # another pid, later: another process, not a cycle
    _write(tmp_path / "c.json", _doc(20_000, host="h2", pid=7))  # the same pid on another host
    m = load_traces(tmp_path)
    assert m.ranks == [0, 1, 2] and m.errors == ()


def test_without_a_host_name_pids_are_not_trusted(tmp_path: Path) -> None:
    # containers: the same small pid on every host, and no host name to tell them apart
    _write(tmp_path / "a.json", _doc(0, host=None))
    _write(tmp_path / "b.json", _doc(10_000, host=None))
    m = load_traces(tmp_path)
    assert m.ranks == [0, 1] and m.errors == ()


def test_same_process_overlapping_but_not_a_copy_is_kept(tmp_path: Path) -> None:
    _write(tmp_path / "a.json", _doc(0, n=3))
    _write(tmp_path / "b.json", _doc(100, n=3))  # same host and pid, overlapping, different span: left as is
    m = load_traces(tmp_path)
    assert m.ranks == [0, 1] and m.errors == ()


def test_as_many_cycles_on_every_rank_keep_the_latest_whatever_the_clocks(tmp_path: Path) -> None:
    # rank 1's host clock is a whole cycle ahead: with as many cycles on each rank, the latest ones still match
    _two_cycles_per_rank(tmp_path, rank1_ahead_us=10_000)
    m = load_traces(tmp_path)
    assert [Path(m[r].meta.path).name for r in (0, 1)] == ["b.json", "d.json"]

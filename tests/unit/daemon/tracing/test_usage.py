"""GetStatus' trace_dir_bytes comes from the retention pass (which walks the trace dir anyway), not from a walk per
call; it follows traces written and deleted within one retention period, and is measured by the reader when no pass
has recorded it for two."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from dyno.daemon.config import DaemonConfig
from dyno.daemon.tracing import retention, trust
from dyno.daemon.tracing.subsystem import Tracing
from dyno.daemon.tracing.usage import TraceDirUsage

pytestmark = pytest.mark.unit


def _tracing(trace_dir: Path, tmp_path: Path, **kw: int) -> Tracing:
    config = DaemonConfig(
        trace_dir=trace_dir, agent_socket=tmp_path / "agent.sock", kineto_endpoint="off", trace_retention_s=3600.0, **kw
    )
    trace_dir.mkdir(parents=True, exist_ok=True)
    return Tracing(config, "hostA")


def _many_traces(trace_dir: Path, n: int) -> None:
    for i in range(n):
        d = trust.make_trace_dir(trace_dir, f"t{i:04d}")
        (d / f"hostA_{i}.pt.trace.json.gz").write_bytes(b"x" * 100)


def test_get_status_reads_the_figure_without_walking_the_trace_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = tmp_path / "traces"
    _many_traces(traces, 200)
    tracing = _tracing(traces, tmp_path)
    tracing._retention()
    scans: list[object] = []
    real_scandir = os.scandir
    monkeypatch.setattr(os, "scandir", lambda *a: scans.append(a) or real_scandir(*a))
    figures = {tracing.trace_dir_bytes() for _ in range(100)}
    assert scans == []  # it was one scandir per folder (201 here) on every GetStatus
    assert figures == {retention.tree_size(traces)}


def test_the_figure_follows_traces_written_and_deleted(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    _many_traces(traces, 3)
    (traces / "notes.txt").write_bytes(b"n" * 10)  # a loose file and someone's folder count too, as before
    (traces / "someones").mkdir()
    (traces / "someones" / "big").write_bytes(b"s" * 5000)
    tracing = _tracing(traces, tmp_path)
    tracing._retention()
    assert tracing.trace_dir_bytes() == retention.tree_size(traces)
    before = tracing.trace_dir_bytes()
    new = trust.make_trace_dir(traces, "t-new")
    (new / "hostA_9.pt.trace.json.gz").write_bytes(b"y" * 4000)
    assert tracing.trace_dir_bytes() == before  # not yet: at most one retention period (30 s) late
    tracing._retention()  # the next pass (every 30 s in the daemon) finds it
    assert tracing.trace_dir_bytes() == retention.tree_size(traces) > before
    os.utime(new, (1, 1))  # now the oldest by far, and past the age limit
    tracing._retention()
    assert not new.exists() and tracing.trace_dir_bytes() == retention.tree_size(traces)


def test_a_figure_older_than_its_bound_is_measured_by_the_reader_once() -> None:
    now = [100.0]
    walks: list[Path] = []
    entered, release = threading.Event(), threading.Event()

    def measure(path: Path) -> int:
        walks.append(path)
        entered.set()
        release.wait(10)
        return 777

    usage = TraceDirUsage(Path("/traces"), max_age_s=60.0, measure=measure, clock=lambda: now[0])
    usage.record(5)
    now[0] += 60.0
    assert usage.bytes() == 5 and walks == []  # within the bound: the recorded figure
    now[0] += 0.5
    results: list[int] = []
    readers = [threading.Thread(target=lambda: results.append(usage.bytes())) for _ in range(4)]
    for t in readers:
        t.start()
    assert entered.wait(10)
    release.set()
    for t in readers:
        t.join(10)
    assert results == [777] * 4 and walks == [Path("/traces")]  # one walk for all the readers that found it stale
    usage.record(9)
    assert usage.bytes() == 9

"""ClusterTrace._follow_host after a dynod restart mid-trace: it waits for the
processes that can still report to the restarted daemon, and no longer than that."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from dyno.client.cluster import Cluster
from dyno.client.cluster_trace import ClusterTrace
from dyno.client.errors import NotFound, Unavailable
from dyno.client.hosts import Host
from dyno.client.trace_records import ProcRecord
from dyno.v1 import dyno_pb2

from conftest import free_port

pytestmark = pytest.mark.unit

_RESTARTED = "no trace 't-r' (its folder exists ...: the trace was still running when this daemon restarted)"


class _RestartedDaemon:
    """A daemon that restarted mid-trace and never hears of the trace again."""

    def __init__(self) -> None:
        self.calls = 0

    def get_trace(self, trace_id: str) -> dyno_pb2.TraceStatus:
        self.calls += 1
        raise NotFound(_RESTARTED)


def _follow(tmp_path: Path, *procs: ProcRecord) -> tuple[ClusterTrace, threading.Thread]:
    cluster = Cluster([Host("127.0.0.1", free_port())], deadline_s=1)
    request = dyno_pb2.TraceRequest(job_id="j", trace_id="t-r", duration_ms=100)
    ct = ClusterTrace(cluster, request, tmp_path, wait_s=120, unreachable_s=0.2, poll_s=0.02)
    daemon = _RestartedDaemon()
    ct.cluster.client = lambda _host: daemon  # type: ignore[method-assign]
    ct.started_monotonic = time.monotonic()
    h = ct.hosts[0]
    h.processes = list(procs)
    t = threading.Thread(target=ct._follow_host, args=(h,), daemon=True)
    t.start()
    return ct, t


def _ended(ct: ClusterTrace, t: threading.Thread) -> bool:
    t.join(15)  # far below wait_s (120 s): the follow must end on its own, not at --timeout-s
    ended = not t.is_alive()
    ct._stop.set()
    t.join(5)
    ct.cluster.close()
    return ended


def test_kineto_only_host_is_not_waited_for_after_a_restart(tmp_path: Path) -> None:
    """A restarted daemon takes on only agent processes' reports: a host whose unfinished processes are all
    libkineto ones fails with the restart reason at once instead of waiting out --timeout-s."""
    ct, t = _follow(tmp_path, ProcRecord(pid=11, rank=0, protocol="kineto", state="running"))
    assert _ended(ct, t)
    (h,) = ct.snapshot()
    assert h.state == "failed" and "restarted" in h.error


def test_pending_agent_is_not_waited_for_after_a_restart(tmp_path: Path) -> None:
    """An agent that had not picked the request up (pending) never records it: nothing can arrive."""
    ct, t = _follow(tmp_path, ProcRecord(pid=12, rank=0, protocol="agent", state="pending"))
    assert _ended(ct, t)
    assert ct.snapshot()[0].state == "failed"


def test_recording_agent_is_waited_for_after_a_restart(tmp_path: Path) -> None:
    """An agent process that was recording goes on and reports to the restarted daemon: worth waiting for."""
    ct, t = _follow(tmp_path, ProcRecord(pid=13, rank=0, protocol="agent", state="running"))
    t.join(0.5)
    assert t.is_alive()  # still waiting (until --timeout-s or a report)
    ct._stop.set()
    t.join(5)
    ct.cluster.close()
    assert not t.is_alive()


class _BrokenHistory:
    """A history whose append raises (a bug below tick(), not a hung driver call)."""

    def append(self, sample: object) -> None:
        raise RuntimeError("broken history")


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the loop thread's end
def test_prime_returns_at_once_when_the_first_tick_raises() -> None:
    """dynod's start-up waits in prime() for the first sample: a first tick that raised (not one that hangs) must
    not hold start-up for the whole stall limit and then be reported as a hung driver call."""
    from dyno.daemon.loop import SamplingLoop

    loop = SamplingLoop([], _BrokenHistory(), 1.0, stall_s=60.0)  # type: ignore[arg-type]
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(loop.prime()), daemon=True)
    t.start()
    t.join(15)  # far below the stall limit
    loop.stop(timeout=5)
    assert result == [False]


class _RestartingDaemon:
    """Down (UNAVAILABLE), then back and answering 'restarted' for a while, one more blip, then the trace's end."""

    def __init__(self) -> None:
        self.calls = 0

    def get_trace(self, trace_id: str) -> dyno_pb2.TraceStatus:
        self.calls += 1
        if self.calls == 1 or self.calls == 40:
            raise Unavailable("connection refused")
        if self.calls < 40:
            raise NotFound(_RESTARTED)
        failed = dyno_pb2.ProcessTrace(pid=13, rank=0, state=dyno_pb2.TRACE_STATE_FAILED, error="x")
        return dyno_pb2.TraceStatus(trace_id=trace_id, processes=[failed], finished=True)


def test_a_blip_after_a_restart_answer_does_not_fail_the_host(tmp_path: Path) -> None:
    """The unreachable clock starts at the restart's UNAVAILABLE; the daemon's 'restarted' answers show it is up, so
    one UNAVAILABLE much later is a new blip, not unreachable_s of failures."""
    cluster = Cluster([Host("127.0.0.1", free_port())], deadline_s=1)
    request = dyno_pb2.TraceRequest(job_id="j", trace_id="t-r", duration_ms=100)
    ct = ClusterTrace(cluster, request, tmp_path, wait_s=120, unreachable_s=0.2, poll_s=0.02)
    ct.cluster.client = lambda _host: _RestartingDaemon()  # type: ignore[method-assign]
    ct.started_monotonic = time.monotonic()
    h = ct.hosts[0]
    h.processes = [ProcRecord(pid=13, rank=0, protocol="agent", state="running")]
    ct._follow_host(h)
    cluster.close()
    (h,) = ct.snapshot()
    assert h.state == "done", h.error
    assert h.processes[0].state == "failed"

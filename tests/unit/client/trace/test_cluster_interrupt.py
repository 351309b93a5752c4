"""ClusterTrace.interrupt (Ctrl-C) with a wedged daemon among the hosts: one deadline bounds the whole of it, and the
cancels go to every host at once, not after the host threads have stopped. Against in-process fake daemons; the
wedged one answers StartTrace, then holds every GetTrace and CancelTrace (a daemon whose port still takes
connections but that answers nothing, e.g. SIGSTOPped)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dyno.client.cluster import Cluster
from dyno.client.trace.cluster import ClusterTrace
from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


class WedgedServicer(FakeDynoServicer):
    """Two processes whose traces run until CancelTrace. Once `wedged` is set, GetTrace and CancelTrace hang until
    `release` (the test's end)."""

    def __init__(self, hostname: str) -> None:
        super().__init__(hostname)
        self.cancelled = threading.Event()
        self.wedged = threading.Event()
        self.release = threading.Event()
        self.get_held = threading.Event()  # a GetTrace is being held
        self.cancel_at: float | None = None  # when CancelTrace arrived (monotonic)

    def GetTrace(self, request, context):  # noqa: N802 - grpc method name
        if self.wedged.is_set():
            self.get_held.set()
            self.release.wait(30)
        return self.running_status(request.trace_id, self.cancelled.is_set())

    def CancelTrace(self, request, context):  # noqa: N802
        self.cancel_at = time.monotonic()
        if self.wedged.is_set():
            self.release.wait(30)
        self.cancelled.set()
        return self.running_status(request.trace_id, self.cancelled.is_set())


@pytest.fixture
def two_hosts() -> Iterator[tuple[FakeServer[WedgedServicer], FakeServer[WedgedServicer]]]:
    live = serve(lambda port: WedgedServicer(f"live-{port}"))
    wedged = serve(lambda port: WedgedServicer(f"wedged-{port}"))
    yield live, wedged
    for f in (live, wedged):
        f.servicer.release.set()
        f.stop(0)


def _request() -> dyno_pb2.TraceRequest:
    return dyno_pb2.TraceRequest(trace_id="t-ctrlc", job_id="job1", duration_ms=60000)


def test_interrupt_with_a_wedged_host_cancels_everywhere_within_one_deadline(two_hosts, tmp_path: Path) -> None:
    live, wedged = two_hosts
    # a call deadline far beyond the grace period: the wedged host's GetTrace would hold its thread that long
    with Cluster([live.target, wedged.target], deadline_s=20) as cluster:
        ct = ClusterTrace(cluster, _request(), tmp_path, wait_s=60, poll_s=0.05)
        ct.start()
        wedged.servicer.wedged.set()
        ct.follow()
        assert wedged.servicer.get_held.wait(10), "the wedged host's thread never called GetTrace"
        began = time.monotonic()
        ct.interrupt(grace_s=1.0)
        took = time.monotonic() - began
    # both cancels were sent at once, while the wedged host's thread was still held in its GetTrace: not after
    # the threads had stopped (that waited out the grace period first), nor one after the other
    assert live.servicer.cancel_at is not None and wedged.servicer.cancel_at is not None
    assert live.servicer.cancel_at - began < 0.5 and wedged.servicer.cancel_at - began < 0.5
    assert not wedged.servicer.release.is_set()  # (still held: nothing was answered there)
    live_h, wedged_h = ct.snapshot()
    assert live.servicer.cancelled.is_set() and {p.state for p in live_h.processes} == {"cancelled"}
    assert all(p.error.startswith("cancelled: interrupted") for p in live_h.processes)
    assert wedged_h.state == "failed" and wedged_h.error == "interrupted"
    assert all(p.error for p in wedged_h.processes)
    print(f"interrupt(grace_s=1.0) with a wedged host took {took:.2f} s")
    assert took < 1.0 + 1.0  # one deadline (generous slack: a behaviour check, not a benchmark; it took 2 before)


def test_a_grace_of_zero_still_sends_the_cancels(two_hosts, tmp_path: Path) -> None:
    live, wedged = two_hosts
    with Cluster([live.target, wedged.target], deadline_s=20) as cluster:
        ct = ClusterTrace(cluster, _request(), tmp_path, wait_s=60, poll_s=0.05)
        ct.start()
        ct.follow()
        ct.interrupt(grace_s=0)
    assert live.servicer.cancel_at is not None and wedged.servicer.cancel_at is not None
    assert {h.state for h in ct.snapshot()} == {"failed"}

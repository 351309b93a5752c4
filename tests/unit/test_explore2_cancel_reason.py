"""Traces cancelled by dyno-cli trace itself (its --timeout-s ran out) must say so: the daemon's generic
"cancelled by request" hid why, since every cancel is "by request"."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dyno.client.cluster import Cluster
from dyno.client.cluster_trace import ClusterTrace
from dyno.client.hosts import Host
from dyno.daemon.fake_server import FakeDynoServicer, serve
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


class RunsUntilCancelled(FakeDynoServicer):
    def __init__(self) -> None:
        super().__init__("node0")
        self.cancelled = threading.Event()

    def _status(self, trace_id: str) -> dyno_pb2.TraceStatus:
        done = self.cancelled.is_set()
        state = dyno_pb2.TRACE_STATE_CANCELLED if done else dyno_pb2.TRACE_STATE_RUNNING
        procs = [
            dyno_pb2.ProcessTrace(pid=p.pid, state=state, error="cancelled by request" if done else "")
            for p in self._processes()
        ]
        return dyno_pb2.TraceStatus(trace_id=trace_id, processes=procs, finished=done, hostname=self.hostname)

    def GetTrace(self, request, context):  # noqa: N802 - grpc method name
        return self._status(request.trace_id)

    def CancelTrace(self, request, context):  # noqa: N802
        self.cancelled.set()
        return self._status(request.trace_id)


@pytest.fixture
def host() -> Iterator[Host]:
    fake = serve(lambda _port: RunsUntilCancelled())
    yield Host("127.0.0.1", fake.port)
    fake.server.stop(0)


def test_a_timeout_cancel_says_it_was_the_timeout(host: Host, tmp_path: Path) -> None:
    request = dyno_pb2.TraceRequest(job_id="job1", trace_id="t-timeout", duration_ms=60_000)
    with Cluster([host], deadline_s=2) as cluster:
        ct = ClusterTrace(cluster, request, tmp_path, wait_s=0.2, poll_s=0.05)
        ct.start()
        ct.follow()
        assert ct.wait(10)
    (h,) = ct.snapshot()
    assert {p.state for p in h.processes} == {"cancelled"}
    assert {p.error for p in h.processes} == {"cancelled by dyno-cli (--timeout-s)"}

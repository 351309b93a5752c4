"""ClusterTrace (dyno.client.trace.cluster): a trace started, followed, cancelled and fetched on fake daemons."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from dyno.client.cluster import Cluster
from dyno.client.hosts import Host
from dyno.client.trace.cluster import ClusterTrace
from dyno.client.trace.records import host_dir_name, trace_exit_code
from dyno.daemon.fake_server import FakeDynoServicer, serve, whole_file_chunk
from dyno.filechunks import checksum_of, new_digest
from dyno.v1 import dyno_pb2

from conftest import free_port

pytestmark = pytest.mark.unit

DONE, RUNNING, CANCELLED = dyno_pb2.TRACE_STATE_DONE, dyno_pb2.TRACE_STATE_RUNNING, dyno_pb2.TRACE_STATE_CANCELLED


class TracingServicer(FakeDynoServicer):
    """Two ranks per host. `finish=True`: GetTrace says done and files can be fetched; else the traces run until
    CancelTrace."""

    def __init__(self, hostname: str, finish: bool) -> None:
        super().__init__(hostname)
        self.finish = finish
        self.cancelled = threading.Event()

    def _content(self, pid: int) -> bytes:
        return json.dumps({"traceEvents": [], "host": self.hostname, "pid": pid}).encode()

    def _status(self, trace_id: str) -> dyno_pb2.TraceStatus:
        state = DONE if self.finish else (CANCELLED if self.cancelled.is_set() else RUNNING)
        procs = [
            dyno_pb2.ProcessTrace(
                pid=p.pid,
                rank=p.rank,
                state=state,
                size_bytes=len(self._content(p.pid)) if state == DONE else 0,
                error="cancelled" if state == CANCELLED else "",
            )
            for p in self._processes()
        ]
        return dyno_pb2.TraceStatus(
            trace_id=trace_id, processes=procs, finished=state != RUNNING, hostname=self.hostname
        )

    def GetTrace(self, request, context):  # noqa: N802 - grpc method name
        return self._status(request.trace_id)

    def CancelTrace(self, request, context):  # noqa: N802
        self.cancelled.set()
        return self._status(request.trace_id)

    def FetchTraceFile(self, request, context) -> Iterator[dyno_pb2.FileChunk]:  # noqa: N802
        data = self._content(request.pid)
        yield whole_file_chunk(data, f"{self.hostname}_{request.pid}.json")


@pytest.fixture
def fakes() -> Iterator:
    pool = futures.ThreadPoolExecutor(max_workers=16)
    servers: list[grpc.Server] = []

    def make(finish: bool = True) -> tuple[Host, TracingServicer]:
        name = f"node{len(servers)}"
        fake = serve(lambda _port: TracingServicer(name, finish), executor=pool)
        servers.append(fake.server)
        return Host("127.0.0.1", fake.port), fake.servicer

    yield make
    for s in servers:
        s.stop(0)
    pool.shutdown()


def _request(trace_id: str = "t-unit") -> dyno_pb2.TraceRequest:
    return dyno_pb2.TraceRequest(job_id="job1", trace_id=trace_id, duration_ms=100)


def _following(cluster: Cluster, out: Path, wait_s: float) -> ClusterTrace:
    """The trace of _request() started on `cluster` and followed (polled every 0.05 s) into `out`."""
    ct = ClusterTrace(cluster, _request(), out, wait_s=wait_s, poll_s=0.05)
    ct.start()
    ct.follow()
    return ct


def test_every_host_fetched_into_its_folder_and_a_dead_host_reported(fakes, tmp_path: Path) -> None:
    (a, _), (b, _) = fakes(), fakes()
    dead = Host("127.0.0.1", free_port())
    with Cluster([a, dead, b], deadline_s=2) as cluster:
        ct = ClusterTrace(cluster, _request(), tmp_path / "t-unit", wait_s=10, unreachable_s=1, poll_s=0.05)
        ct.start()
        assert ct.triggered_any
        ct.follow()
        assert ct.wait(20)
    hosts = ct.snapshot()
    assert [h.state for h in hosts] == ["done", "failed", "done"]
    assert hosts[1].error_type == "Unavailable" and not hosts[1].processes
    files = ct.fetched_files()
    assert len(files) == 4
    for h in (hosts[0], hosts[2]):
        assert [p.rank for p in h.processes] == [0, 1]
        for p in h.processes:
            path = tmp_path / "t-unit" / p.file
            assert path.parent.name == host_dir_name(h.host) == f"127.0.0.1_{h.host.port}"
            assert checksum_of(new_digest(path.read_bytes())) == p.checksum
            assert json.loads(path.read_text())["pid"] == p.pid
    assert trace_exit_code(hosts) == 3


def test_unfinished_traces_are_cancelled_after_the_wait(fakes, tmp_path: Path) -> None:
    host, servicer = fakes(finish=False)
    with Cluster([host], deadline_s=2) as cluster:
        ct = _following(cluster, tmp_path, wait_s=0.3)
        assert ct.wait(10)
    assert servicer.cancelled.is_set()
    (h,) = ct.snapshot()
    assert h.state == "done" and {p.state for p in h.processes} == {"cancelled"}
    assert all(p.error for p in h.processes) and ct.fetched_files() == []
    assert trace_exit_code([h]) == 1


def test_interrupt_cancels_and_marks_what_did_not_arrive(fakes, tmp_path: Path) -> None:
    host, servicer = fakes(finish=False)
    with Cluster([host], deadline_s=2) as cluster:
        ct = _following(cluster, tmp_path, wait_s=60)
        ct.interrupt(grace_s=2)
    (h,) = ct.snapshot()
    assert servicer.cancelled.is_set() and h.state == "failed" and h.error == "interrupted"
    assert all(p.error for p in h.processes)


def test_a_trace_needs_a_caller_chosen_id() -> None:
    with Cluster(["a"]) as cluster, pytest.raises(ValueError):
        ClusterTrace(cluster, dyno_pb2.TraceRequest(job_id="j", duration_ms=1), Path("/tmp"), wait_s=1)

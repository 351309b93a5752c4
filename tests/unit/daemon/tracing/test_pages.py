"""A trace's processes in pages (dyno.daemon.tracing.pages): GetTrace, CancelTrace and StartTrace each answer within a
stock gRPC client's 4 MiB whatever the trace holds. A job-wide trace of ~13,000 processes or more (the registry takes
up to --max-processes 65536) answered over 4 MiB, which no stock client receives, with no way to ask for less.
Real grpc server on 127.0.0.1 port 0, grpcio's generated stub with its default options, the real trace manager."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from fake_proc import no_proc_identifier
from grpc_context import Aborted, AbortingContext

from dyno.client.client import DynoClient
from dyno.daemon.answer_bounds import ELLIPSIS
from dyno.daemon.history import History
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.server import DynoServicer, add_to_server
from dyno.daemon.tracing import pages as trace_pages
from dyno.daemon.tracing import service as trace_service
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.service import TraceRpcs
from dyno.daemon.tracing.table import TraceLimits
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

pytestmark = pytest.mark.unit

STOCK_LIMIT = 4 * 1024 * 1024  # grpcio's default max_receive_message_length
JOB = "j" * 128  # the longest job id: each ProcessTrace carries it


def _procs(n: int, text: str = "") -> list[dyno_pb2.ProcessTrace]:
    return [
        dyno_pb2.ProcessTrace(pid=pid, job_id="J", path=f"/t/{pid}.json", error=text, waiting=text)
        for pid in range(1, n + 1)
    ]


def _all_pages(procs: list[dyno_pb2.ProcessTrace], max_bytes: int) -> list[trace_pages.TracePage]:
    pages = [trace_pages.page(procs, "", max_bytes, 100)]
    while pages[-1].next_page_token:
        pages.append(trace_pages.page(procs, pages[-1].next_page_token, max_bytes, 100))
    return pages


def test_a_trace_that_fits_is_one_page_as_it_is() -> None:
    got = trace_pages.page(_procs(3, "e" * 4000), "", 100_000, 100)
    assert not got.next_page_token and [p.error for p in got.processes] == ["e" * 4000] * 3


def test_texts_are_cut_to_one_share_before_any_page_follows() -> None:
    got = _all_pages(_procs(10, "é" * 2000), 20_000)
    assert len(got) == 1 and len(got[0].processes) == 10
    cut = {p.error for p in got[0].processes} | {p.waiting for p in got[0].processes}
    assert len(cut) == 1 and cut.pop().endswith(ELLIPSIS)
    assert all(trace_pages.MIN_TEXT_BYTES <= len(p.error.encode()) < 1000 for p in got[0].processes)


def test_what_still_does_not_fit_comes_in_pages_each_once_in_order() -> None:
    procs = _procs(200, "x" * 4000)
    procs.append(dyno_pb2.ProcessTrace(pid=7000, job_id="J"))  # a process that reported itself later, appended
    pages = _all_pages(procs, 8000)
    assert len(pages) > 5
    assert [p.pid for page in pages for p in page.processes] == [*range(1, 201), 7000]
    for page in pages:
        answer = dyno_pb2.TraceStatus(processes=page.processes, next_page_token=page.next_page_token)
        assert answer.ByteSize() <= 8000 - 100
    assert all(len(p.error.encode()) == trace_pages.MIN_TEXT_BYTES for page in pages for p in page.processes[:-1])


@pytest.mark.parametrize("token", ["not-a-token", "eyJhZnRlciI6IDk5OX0=", "WzFd"])  # garbage, pid 999, [1]
def test_a_token_not_of_this_trace_is_refused(token: str) -> None:
    with pytest.raises(trace_pages.BadTraceToken, match="^page_token: "):
        trace_pages.page(_procs(3), token, 100_000, 100)


def _registry(n: int) -> ProcessRegistry:
    registry = ProcessRegistry(
        is_alive=lambda pid: True, max_processes=n, max_per_uid=n, uid_of=lambda pid: os.getuid()
    )
    for pid in range(1, n + 1):
        registry.register(RegisteredProcess(pid=pid, job_id=JOB, protocol=PROTOCOL_AGENT, cmdline="python train.py"))
    return registry


@dataclass
class _Daemon:
    port: int
    manager: TraceManager


@pytest.fixture
def daemon(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[_Daemon]:
    registry = _registry(request.param)
    manager = TraceManager(
        registry,
        tmp_path / "traces",
        "node1",
        limits=TraceLimits(max_active_traces=2),
        kineto_identifier=no_proc_identifier(),
    )
    servicer = DynoServicer(lambda: dyno_pb2.Status(), History(2), "node1", TraceRpcs(manager, registry, "node1"))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    add_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield _Daemon(port, manager)
    finally:
        server.stop(0)


@pytest.mark.parametrize("daemon", [20_000], indirect=True)
def test_a_trace_of_20000_processes_reaches_a_stock_stub_in_pages(daemon: _Daemon) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
        stub = dyno_pb2_grpc.DynoStub(channel)
        started = stub.StartTrace(dyno_pb2.TraceRequest(job_id=JOB, duration_ms=60_000, trace_id="big"), timeout=60)
        assert started.next_page_token and 0 < len(started.triggered) < 20_000
        assert started.ByteSize() <= STOCK_LIMIT and len(started.matched_pids) == 20_000
        pages = [stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id="big"), timeout=60)]
        while pages[-1].next_page_token:
            request = dyno_pb2.GetTraceRequest(trace_id="big", page_token=pages[-1].next_page_token)
            pages.append(stub.GetTrace(request, timeout=60))
        rest = stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id="big", page_token=started.next_page_token), timeout=60)
        cancelled = stub.CancelTrace(dyno_pb2.CancelTraceRequest(trace_id="big"), timeout=60)
    assert 2 <= len(pages) <= 4 and all(p.ByteSize() <= STOCK_LIMIT and not p.finished for p in pages)
    assert [p.pid for page in pages for p in page.processes] == list(range(1, 20_001))
    assert all(
        p.job_id == JOB and p.path.endswith(f"node1_{p.pid}.pt.trace.json.gz") for page in pages for p in page.processes
    )
    assert rest.processes[0].pid == started.triggered[-1].pid + 1
    assert cancelled.next_page_token and cancelled.finished and cancelled.ByteSize() <= STOCK_LIMIT

    client = DynoClient(f"127.0.0.1:{daemon.port}")
    try:
        whole = client.get_trace("big")  # the pages gathered: nothing changes for dyno-cli or Cluster
    finally:
        client.close()
    assert not whole.next_page_token and whole.finished
    assert [p.pid for p in whole.processes] == list(range(1, 20_001))
    assert {p.state for p in whole.processes} == {dyno_pb2.TRACE_STATE_CANCELLED}


@pytest.mark.parametrize("daemon", [300], indirect=True)
def test_dyno_client_gathers_start_and_cancel_pages(daemon: _Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_service, "MAX_PROCESS_LIST_BYTES", 20_000)  # pages of ~80 processes
    client = DynoClient(f"127.0.0.1:{daemon.port}")
    try:
        started = client.start_trace(dyno_pb2.TraceRequest(job_id=JOB, duration_ms=60_000, trace_id="t"))
        cancelled = client.cancel_trace("t")
    finally:
        client.close()
    assert not started.next_page_token and [p.pid for p in started.triggered] == list(range(1, 301))
    assert not cancelled.next_page_token and [p.pid for p in cancelled.processes] == list(range(1, 301))
    assert cancelled.finished and {p.state for p in cancelled.processes} == {dyno_pb2.TRACE_STATE_CANCELLED}


@pytest.mark.parametrize("daemon", [3], indirect=True)
def test_get_trace_refuses_a_token_not_of_this_trace(daemon: _Daemon) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as channel:
        stub = dyno_pb2_grpc.DynoStub(channel)
        stub.StartTrace(dyno_pb2.TraceRequest(job_id=JOB, duration_ms=60_000, trace_id="t"), timeout=30)
        for token in ("garbage", "x" * 100):
            with pytest.raises(grpc.RpcError) as e:
                stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id="t", page_token=token), timeout=30)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert e.value.details().startswith("page_token: ")


def test_registered_jobs_are_cut_to_what_fits() -> None:
    registry = ProcessRegistry(is_alive=lambda pid: True, max_processes=4000, max_per_uid=4000)
    for pid in range(1, 4001):
        registry.register(RegisteredProcess(pid=pid, job_id=f"{pid:04d}" + "j" * 124, protocol=PROTOCOL_AGENT))
    manager = TraceManager(registry, Path("/nonexistent/traces"), "n", kineto_identifier=no_proc_identifier())
    rpcs = TraceRpcs(manager, registry, "n")
    answer = rpcs.StartTrace(dyno_pb2.TraceRequest(job_id="none", duration_ms=100), AbortingContext())  # type: ignore[arg-type]
    assert not answer.triggered and 1000 < len(answer.registered_jobs) < 4000
    assert sum(len(j) for j in answer.registered_jobs) <= 256 << 10
    with pytest.raises(Aborted):
        rpcs.GetTrace(dyno_pb2.GetTraceRequest(trace_id=""), AbortingContext())  # type: ignore[arg-type]

"""Every unary answer of the Dyno service fits a stock client's 4 MiB (grpcio's default receive limit), also for a
daemon with thousands of registered processes with long command lines (ListProcesses) and a job-wide trace's
TraceStatus with long error texts. Real grpc server on 127.0.0.1 port 0, grpcio's generated stub with its default
options."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from fake_proc import no_proc_identifier
from grpc_context import Aborted, AbortingContext

from dyno.daemon import server as server_module
from dyno.daemon.answer_bounds import ELLIPSIS, fit_texts
from dyno.daemon.history import History, Sample
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import MAX_PROCESSES, ProcessRegistry
from dyno.daemon.samplers.base import Reading, labels
from dyno.daemon.server import DynoServicer, add_to_server
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.service import TraceRpcs
from dyno.request_limits import MAX_METRICS_RESPONSE_BYTES
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

pytestmark = pytest.mark.unit


def _full_registry(n: int) -> TraceRpcs:
    """The trace RPCs of a registry of `n` processes with 4 KiB command lines (the agent's bound)."""
    registry = ProcessRegistry(is_alive=lambda pid: True, max_processes=n, max_per_uid=n)
    for pid in range(1, n + 1):
        cmdline = f"python train.py {pid} " + "x" * 4000
        registry.register(RegisteredProcess(pid=pid, job_id="j" * 128, protocol=PROTOCOL_AGENT, cmdline=cmdline))
    manager = TraceManager(registry, Path("/nonexistent/traces"), "n", kineto_identifier=no_proc_identifier())
    return TraceRpcs(manager, registry, "n")


class _HugeTraceRpcs:
    """GetTrace of a job-wide trace of MAX_PROCESSES processes with long texts; the registry's ListProcesses."""

    def __init__(self, processes: int) -> None:
        rpcs = _full_registry(processes)
        self.ListProcesses, self.ListProcessesEncoded = rpcs.ListProcesses, rpcs.ListProcessesEncoded

    def GetTrace(self, request: Any, context: grpc.ServicerContext) -> Any:
        procs = [
            dyno_pb2.ProcessTrace(pid=p, path=f"/var/lib/dyno/traces/t/{p}.json", error="é" * 2048, waiting="w" * 4096)
            for p in range(1, MAX_PROCESSES + 1)
        ]
        return dyno_pb2.TraceStatus(trace_id=request.trace_id, processes=procs)

    StartTrace = CancelTrace = FetchTraceFile = GetTrace


@contextlib.contextmanager
def _serving(servicer: DynoServicer) -> Iterator[int]:
    """`servicer` served by a real grpc server as dynod wires it (add_to_server) on a loopback port; stopped after."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    add_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield port
    finally:
        server.stop(0)


@pytest.mark.parametrize("processes", [MAX_PROCESSES, 20_000])
def test_huge_answers_fit_a_stock_stub_with_every_process_listed(processes: int) -> None:
    """MAX_PROCESSES: the default registry cap, in one answer; 20,000 (--max-processes allows 65536): in pages."""
    servicer = DynoServicer(lambda: dyno_pb2.Status(), History(2), "n", _HugeTraceRpcs(processes))
    with _serving(servicer) as port, grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = dyno_pb2_grpc.DynoStub(channel)
        pages = [stub.ListProcesses(dyno_pb2.ListProcessesRequest(), timeout=30)]
        while pages[-1].next_page_token:
            request = dyno_pb2.ListProcessesRequest(page_token=pages[-1].next_page_token)
            pages.append(stub.ListProcesses(request, timeout=30))
        trace = stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id="t"), timeout=30)
    assert len(pages) == 1 if processes == MAX_PROCESSES else 2 <= len(pages) <= 5
    procs = [p for page in pages for p in page.processes]
    assert [p.pid for p in procs] == list(range(1, processes + 1))
    assert all(p.job_id == "j" * 128 and p.cmdline.endswith(ELLIPSIS) for p in procs)
    assert procs[0].cmdline.startswith("python train.py 1 ")
    assert len(trace.processes) == MAX_PROCESSES and trace.processes[-1].path.endswith(f"/{MAX_PROCESSES}.json")
    assert all(p.error.endswith(ELLIPSIS) and p.error.startswith("é") for p in trace.processes)


def test_an_answer_within_the_bound_is_left_as_it_is() -> None:
    answer = dyno_pb2.ListProcessesResponse(processes=[dyno_pb2.ProcessInfo(pid=1, cmdline="x" * 5000)])
    assert not fit_texts(answer, "processes", ("cmdline",), 10_000)
    assert answer.processes[0].cmdline == "x" * 5000
    assert fit_texts(answer, "processes", ("cmdline",), 1000)
    assert answer.ByteSize() <= 1000 and answer.processes[0].cmdline.endswith(ELLIPSIS)


# GetMetrics over a long history: every answer fits a stock client's 4 MiB whatever the request; the newest sample
# is the default, a range comes in pages.


def _servicer(samples: int) -> DynoServicer:
    h = History(samples)
    for t in range(1, samples + 1):
        h.append(
            Sample(t, tuple(Reading("gpu_power_watts", float(t), labels(gpu=g, uuid=f"GPU-{g}")) for g in range(50)))
        )
    return DynoServicer(lambda: dyno_pb2.Status(), h, "node1")


def _get(
    servicer: DynoServicer, limit: int = 0, names: tuple[str, ...] = (), *, token: str = "", whole: bool = False
) -> dyno_pb2.GetMetricsResponse:
    request = dyno_pb2.GetMetricsRequest(limit=limit, names=list(names), page_token=token, whole_history=whole)
    return servicer.GetMetrics(request, AbortingContext())  # type: ignore[arg-type]


def _pages(servicer: DynoServicer, names: tuple[str, ...] = (), **first: object) -> list[dyno_pb2.GetMetricsResponse]:
    pages = [_get(servicer, names=names, **first)]  # type: ignore[arg-type]
    while pages[-1].next_page_token:
        pages.append(_get(servicer, names=names, token=pages[-1].next_page_token))
    return pages


def test_an_empty_request_answers_the_newest_sample_only() -> None:
    got = _get(_servicer(100))
    assert [s.timestamp_ms for s in got.samples] == [100] and not got.next_page_token
    assert len(_get(_servicer(100), limit=7).samples) == 7


def test_a_range_bigger_than_a_page_comes_in_pages_that_add_up_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    servicer = _servicer(100)
    one = len(_get(servicer).SerializeToString())
    monkeypatch.setattr(server_module, "MAX_METRICS_PAGE_BYTES", 30 * one)
    pages = _pages(servicer, whole=True)
    assert 4 <= len(pages) <= 5
    assert all(len(p.SerializeToString()) <= 30 * one and p.hostname == "node1" for p in pages)
    assert [s.timestamp_ms for p in pages for s in p.samples] == list(range(1, 101))
    assert not pages[-1].next_page_token
    newest = _pages(servicer, limit=40)  # the newest 40, paged: the range stays those 40
    assert [s.timestamp_ms for p in newest for s in p.samples] == list(range(61, 101))
    filtered = _get(servicer, names=("nomatch",), whole=True)  # filtered: small again, one page
    assert len(filtered.samples) == 100 and not filtered.next_page_token


def test_a_sample_bigger_than_a_page_is_split_over_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    servicer = _servicer(3)
    whole = _get(servicer).samples[0]
    monkeypatch.setattr(server_module, "MAX_METRICS_PAGE_BYTES", len(whole.SerializeToString()) // 3 + 400)
    pages = _pages(servicer, whole=True)
    assert len(pages) >= 6
    parts = [s for p in pages for s in p.samples]
    assert {s.timestamp_ms for s in parts} == {1, 2, 3}
    newest = [m for s in parts if s.timestamp_ms == 3 for m in s.metrics]
    assert newest == list(whole.metrics)  # every value once, in order


def test_a_page_token_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    servicer = _servicer(100)
    monkeypatch.setattr(server_module, "MAX_METRICS_PAGE_BYTES", 10_000)
    token = _get(servicer, names=("gpu_*",), whole=True).next_page_token
    assert token
    with pytest.raises(Aborted) as e:
        _get(servicer, names=("cpu_*",), token=token)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "names" in e.value.details
    for bad in ("x", "MS4yLjM", "A" * 300):
        with pytest.raises(Aborted) as e:
            _get(servicer, token=bad)
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and e.value.details.startswith("page_token:")


def test_the_page_bound_fits_a_stock_client_and_dyno_cli_gathers_less_than_it_receives() -> None:
    from dyno.client import client

    assert server_module.MAX_METRICS_PAGE_BYTES < 4 * 1024 * 1024
    assert MAX_METRICS_RESPONSE_BYTES <= client.MAX_RECEIVE_BYTES // 2


def test_over_grpc_pages_arrive_intact_in_a_stock_stub(monkeypatch: pytest.MonkeyPatch) -> None:
    """add_to_server sends GetMetrics' encoded bytes as they are (no parsed copy in the daemon); the stub is
    grpcio's with its default limits, and DynoClient gathers the pages into one answer."""
    from dyno.client import DynoClient
    from dyno.client.errors import ResourceExhausted

    servicer = _servicer(40)
    with _serving(servicer) as port:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = dyno_pb2_grpc.DynoStub(channel)
            got = stub.GetMetrics(dyno_pb2.GetMetricsRequest(limit=3, names=["gpu_*"]), timeout=10)
            assert got == _get(servicer, limit=3) and got.hostname == "node1" and len(got.samples[0].metrics) == 50
            monkeypatch.setattr(server_module, "MAX_METRICS_PAGE_BYTES", 5000)
            first = stub.GetMetrics(dyno_pb2.GetMetricsRequest(whole_history=True), timeout=10)
            assert first.next_page_token and 0 < len(first.samples) < 40
        with DynoClient(f"127.0.0.1:{port}") as c:
            assert [s.timestamp_ms for s in c.metrics().samples] == list(range(1, 41))
            assert len(c.metrics(limit=5).samples) == 5
            with pytest.raises(ResourceExhausted, match=r"more than 0 MiB \(about the newest \d+ fit\)"):
                c.metrics(max_bytes=12_000)


class _StreamContext(AbortingContext):
    def __init__(self) -> None:
        self.callbacks: list = []

    def add_callback(self, callback) -> bool:  # type: ignore[no-untyped-def]
        self.callbacks.append(callback)
        return True

    def is_active(self) -> bool:
        return True

    def end(self) -> None:  # what grpc does when the RPC ends, however it ends
        for callback in self.callbacks:
            callback()


def test_live_streams_are_bounded_so_they_cannot_starve_every_other_call() -> None:
    """Each StreamMetrics holds one of dynod's 32 RPC threads for as long as it runs: 32 `dyno-cli metrics --watch`
    (nobody needs a token for it) left GetStatus, health checks and StartTrace waiting until their deadline."""
    servicer = _servicer(2)
    contexts = [_StreamContext() for _ in range(server_module.MAX_METRIC_STREAMS)]
    streams = [servicer.StreamMetrics(dyno_pb2.StreamMetricsRequest(), c) for c in contexts]  # type: ignore[arg-type]
    assert server_module.MAX_METRIC_STREAMS <= 16  # half the worker threads at most
    with pytest.raises(Aborted) as e:
        servicer.StreamMetrics(dyno_pb2.StreamMetricsRequest(), _StreamContext())  # type: ignore[arg-type]
    assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED and "live metric streams" in e.value.details
    contexts[0].end()  # one stream ends (client gone, cancelled, deadline): its place is free
    assert servicer.StreamMetrics(dyno_pb2.StreamMetricsRequest(), _StreamContext()) is not None  # type: ignore[arg-type]
    assert len(streams) == server_module.MAX_METRIC_STREAMS


def test_a_streamed_sample_too_big_for_one_message_comes_in_parts_of_its_timestamp() -> None:
    from dyno.daemon.wire import sample_messages

    sample = Sample(7, tuple(Reading("gpu_power_watts", float(g), labels(gpu=g)) for g in range(300)))
    whole = sample_messages(sample)
    assert len(whole) == 1 and len(whole[0].metrics) == 300
    parts = sample_messages(sample, max_bytes=whole[0].ByteSize() // 4)
    assert len(parts) >= 4 and all(p.timestamp_ms == 7 and p.ByteSize() <= whole[0].ByteSize() // 4 for p in parts)
    assert [m for p in parts for m in p.metrics] == list(whole[0].metrics)

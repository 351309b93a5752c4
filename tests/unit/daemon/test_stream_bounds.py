"""Long-lived RPCs are capped (dyno.daemon.stream_slots) so they can never take every RPC thread of dynod.

Before the cap, FetchTraceFile streams had none: each holds one of the server's threads until its client has read
the file, so a few CLIs fetching at once (or slow links) left GetStatus, health checks and StartTrace queued, and so
did idle grpc reflection sessions. Real grpc servers on 127.0.0.1 port 0, with dynod's own thread pool size.
"""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from types import SimpleNamespace

import grpc
import pytest
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

from dyno.client import client as client_module
from dyno.client.cli import build_parser
from dyno.client.client import DynoClient
from dyno.client.errors import ResourceExhausted
from dyno.client.trace.cluster import ClusterTrace
from dyno.daemon import stream_slots
from dyno.daemon.history import History, Sample
from dyno.daemon.samplers.base import Reading
from dyno.daemon.server import DYNO_SERVICE, DynoServicer, add_reflection, add_to_server
from dyno.daemon.tracing.service import TraceRpcs
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

pytestmark = pytest.mark.unit

_CHUNK = 4096


class _OneFile:
    """The part of TraceManager that FetchTraceFile calls: every (trace id, pid) names `path`; and what TraceRpcs
    takes for its roles cache when built (`roles`, `table.clock_ms`: not called, nothing is listed here)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.table = SimpleNamespace(clock_ms=lambda: 0)

    def roles(self, procs: list[object]) -> dict[int, str]:
        return {}

    def trace_file(self, trace_id: str, pid: int) -> Path:
        return self.path


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    # many small chunks: a stream whose client reads only its first stays open (grpc flow control holds the rest)
    path = tmp_path / "t1_7.pt.trace.json"
    path.write_bytes(os.urandom(16 * 1024 * 1024))
    return path


@pytest.fixture
def server(trace_file: Path) -> Iterator[tuple[int, TraceRpcs]]:
    history = History(4)
    history.append(Sample(1, (Reading("cpu_user_percent", 1.0, ()),)))
    rpcs = TraceRpcs(_OneFile(trace_file), None, "node1")  # type: ignore[arg-type]
    servicer = DynoServicer(lambda: dyno_pb2.Status(hostname="node1"), history, "node1", trace_rpcs=rpcs)
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=stream_slots.RPC_THREADS))  # dynod's pool (app.py)
    add_to_server(servicer, srv)
    add_reflection(srv, (DYNO_SERVICE, reflection.SERVICE_NAME))
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    try:
        yield port, rpcs
    finally:
        servicer.shutdown()
        srv.stop(0).wait()


def _hold_fetch(stub: dyno_pb2_grpc.DynoStub) -> grpc.Future:
    """A FetchTraceFile stream that has started (its first chunk read) and is left open, unread."""
    call = stub.FetchTraceFile(dyno_pb2.FetchTraceFileRequest(trace_id="t1", pid=7, chunk_size=_CHUNK), timeout=60)
    assert next(call).offset == 0
    return call


def test_fetch_streams_are_capped_and_the_refusal_says_how_many_and_to_retry(server: tuple[int, TraceRpcs]) -> None:
    port, rpcs = server
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = dyno_pb2_grpc.DynoStub(channel)
        held = [_hold_fetch(stub) for _ in range(stream_slots.MAX_FETCH_STREAMS)]
        with pytest.raises(grpc.RpcError) as e:
            next(stub.FetchTraceFile(dyno_pb2.FetchTraceFileRequest(trace_id="t1", pid=7), timeout=10))
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        n = stream_slots.MAX_FETCH_STREAMS
        assert f"{n} trace file streams are already open" in e.value.details() and "retry" in e.value.details()
        assert dict(e.value.trailing_metadata())[stream_slots.RETRY_AFTER_KEY] == "200"  # the client's retry hint
        held[0].cancel()  # one client gone: its place is free again
        call = stub.FetchTraceFile(dyno_pb2.FetchTraceFileRequest(trace_id="t1", pid=7, chunk_size=_CHUNK), timeout=60)
        assert next(call).offset == 0
        assert rpcs._fetch_slots.open == n
        for c in [*held[1:], call]:
            c.cancel()


def test_capped_streams_leave_threads_for_unary_calls(server: tuple[int, TraceRpcs]) -> None:
    """Every kind of long stream at its cap at once: status still answers (it queued behind them before)."""
    port, _ = server
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = dyno_pb2_grpc.DynoStub(channel)
        held: list[grpc.Future] = [_hold_fetch(stub) for _ in range(stream_slots.MAX_FETCH_STREAMS)]
        for _ in range(4):
            with pytest.raises(grpc.RpcError, match="RESOURCE_EXHAUSTED"):
                _hold_fetch(stub)
        for _ in range(stream_slots.MAX_METRIC_STREAMS + 4):
            call = stub.StreamMetrics(dyno_pb2.StreamMetricsRequest(), timeout=60)
            held.append(call)
        reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
        refused, idle = 0, threading.Event()
        for _ in range(stream_slots.MAX_REFLECTION_STREAMS + 4):
            call = reflect.ServerReflectionInfo(_idle_session(idle), timeout=60)
            try:
                assert next(call).list_services_response.service  # answered, then left idle
                held.append(call)
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "reflection streams" in e.details()
                refused += 1
        try:
            assert refused == 4  # the idle sessions past the cap
            for _ in range(3):
                assert stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=10).hostname == "node1"
        finally:
            idle.set()
            for c in held:
                c.cancel()


def _idle_session(end: threading.Event) -> Iterator[reflection_pb2.ServerReflectionRequest]:
    """One reflection request, then none until `end` (an idle grpcurl-like session)."""
    yield reflection_pb2.ServerReflectionRequest(list_services="")
    end.wait(60)


def test_the_cli_fetches_fewer_files_at_once_than_the_cap_and_the_caps_leave_unary_threads() -> None:
    parser = build_parser()
    cluster_default = inspect.signature(ClusterTrace).parameters["fetch_concurrency"].default
    for cmd in (["fetch", "--trace-id", "t1"], ["trace", "--job-id", "1", "--duration-ms", "100"]):
        cli_default = parser.parse_args([*cmd, "--output-dir", "out"]).fetch_concurrency
        assert cli_default == cluster_default < stream_slots.MAX_FETCH_STREAMS
    streams = stream_slots.MAX_METRIC_STREAMS + stream_slots.MAX_FETCH_STREAMS + stream_slots.MAX_REFLECTION_STREAMS
    assert stream_slots.RPC_THREADS - streams >= 8


def test_dyno_client_waits_for_a_busy_daemon_and_gets_the_file(
    server: tuple[int, TraceRpcs], trace_file: Path, tmp_path: Path
) -> None:
    port, rpcs = server
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = dyno_pb2_grpc.DynoStub(channel)
        held = [_hold_fetch(stub) for _ in range(stream_slots.MAX_FETCH_STREAMS)]
        progress: list[int] = []
        result: list[object] = []

        def fetch() -> None:
            with DynoClient(f"127.0.0.1:{port}") as c:
                try:
                    result.append(c.fetch_trace_file("t1", 7, tmp_path / "out", timeout_s=60, on_chunk=progress.append))
                except Exception as e:  # reported by the assertion below
                    result.append(e)

        worker = threading.Thread(target=fetch)
        worker.start()
        while not progress:  # refused at least once: on_chunk(0) runs before each retry
            worker.join(0.05)
            assert worker.is_alive(), result
        assert progress[0] == 0 and rpcs._fetch_slots.open == stream_slots.MAX_FETCH_STREAMS
        held[0].cancel()
        worker.join(60)
        got = result[0]
        assert not isinstance(got, Exception), got
        assert got.path.read_bytes() == trace_file.read_bytes()  # type: ignore[attr-defined]
        for c in held[1:]:
            c.cancel()


def test_a_daemon_busy_past_the_deadline_is_a_failure_naming_the_host_and_the_reason(
    server: tuple[int, TraceRpcs], tmp_path: Path
) -> None:
    port, _ = server
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = dyno_pb2_grpc.DynoStub(channel)
        held = [_hold_fetch(stub) for _ in range(stream_slots.MAX_FETCH_STREAMS)]
        with DynoClient(f"127.0.0.1:{port}") as c, pytest.raises(ResourceExhausted) as e:
            c.fetch_trace_file("t1", 7, tmp_path / "out", timeout_s=1.0)
        text = str(e.value)
        assert text.startswith(f"127.0.0.1:{port}: ") and "trace file streams are already open" in text
        assert "still refused after" in text and "tries" in text
        assert not list((tmp_path / "out").iterdir())  # no partial file left
        for c in held:
            c.cancel()


def test_other_resource_exhausted_answers_are_not_retried(tmp_path: Path) -> None:
    """Only the daemon's busy hint is retried: a limit the request itself exceeds would fail again."""
    calls: list[int] = []

    def refuse(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        calls.append(1)
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too big")
        yield b""

    handler = grpc.method_handlers_generic_handler(
        DYNO_SERVICE, {"FetchTraceFile": grpc.unary_stream_rpc_method_handler(refuse)}
    )
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    try:
        with DynoClient(f"127.0.0.1:{port}") as c, pytest.raises(ResourceExhausted, match="too big"):
            c.fetch_trace_file("t1", 7, tmp_path, timeout_s=30)
        assert calls == [1]
    finally:
        srv.stop(0)


def test_busy_backoff_grows_from_the_hint_and_stays_short() -> None:
    waits = [client_module._busy_backoff_s(n, 0.2) for n in range(1, 12)]
    assert all(0.1 <= w <= 2.0 for w in waits)
    assert max(waits[:1]) <= 0.2 and min(waits[6:]) >= 1.0  # doubling to the 2 s cap, jitter at most halves

"""A dynod that does not trace refuses every tracing RPC alike: UNIMPLEMENTED with the reason TRACING_DISABLED.
Real gRPC server on a loopback port, a stock stub."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from dyno.daemon.history import History
from dyno.daemon.server import DynoServicer, add_to_server
from dyno.error_reasons import ErrorReason, reason_of
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

pytestmark = pytest.mark.unit


@pytest.fixture
def stub() -> Iterator[dyno_pb2_grpc.DynoStub]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    add_to_server(DynoServicer(lambda: dyno_pb2.Status(), History(2), "n"), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield dyno_pb2_grpc.DynoStub(channel)
    server.stop(0)


CALLS: list[tuple[str, Callable[[dyno_pb2_grpc.DynoStub], Any]]] = [
    ("ListProcesses", lambda s: s.ListProcesses(dyno_pb2.ListProcessesRequest(), timeout=5)),
    ("StartTrace", lambda s: s.StartTrace(dyno_pb2.TraceRequest(job_id="j", duration_ms=100), timeout=5)),
    ("GetTrace", lambda s: s.GetTrace(dyno_pb2.GetTraceRequest(trace_id="t"), timeout=5)),
    ("CancelTrace", lambda s: s.CancelTrace(dyno_pb2.CancelTraceRequest(trace_id="t"), timeout=5)),
]


@pytest.mark.parametrize("name,call", CALLS, ids=[name for name, _ in CALLS])
def test_each_tracing_rpc_is_refused_with_the_tracing_disabled_reason(
    stub: dyno_pb2_grpc.DynoStub, name: str, call: Callable[[dyno_pb2_grpc.DynoStub], Any]
) -> None:
    with pytest.raises(grpc.RpcError) as e:
        call(stub)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert e.value.details() == f"{name}: tracing is not enabled in this daemon"
    assert reason_of(e.value.trailing_metadata()) == ErrorReason.TRACING_DISABLED.value

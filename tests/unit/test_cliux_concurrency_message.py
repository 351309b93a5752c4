"""A host never called because slow hosts held every --max-concurrency slot until the deadline says so, naming the
CLI's option. Before: "not started before the deadline (raise max_concurrency?)", the library's parameter name."""

from __future__ import annotations

import time
from concurrent import futures

import grpc
import pytest

from dyno.client.cli import main as cli_main

pytestmark = pytest.mark.unit


class _Slow(grpc.GenericRpcHandler):
    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        def slow(request: bytes, context: grpc.ServicerContext) -> bytes:
            time.sleep(5)
            return b""

        return grpc.unary_unary_rpc_method_handler(slow)


def test_a_host_left_uncalled_names_max_concurrency(capsys: pytest.CaptureFixture[str]) -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((_Slow(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        hosts = f"127.0.0.1:{port},127.0.0.1:1"  # the second is never called: the first holds the only slot
        code = cli_main(["status", "--hosts", hosts, "--timeout-s", "1", "--max-concurrency", "1"])
    finally:
        server.stop(0)
    err = capsys.readouterr().err
    assert code == 1
    line = next(x for x in err.splitlines() if x.startswith("dyno-cli: error: 127.0.0.1:1:"))
    assert "--max-concurrency" in line and "not called before the deadline" in line, line

"""At most HandlerSlots' count of unary handlers run at once on a real grpc server (dyno.daemon.handler_slots); the
others wait their turn and all are answered; streaming handlers are not held back."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from dyno.daemon.handler_slots import HandlerSlots
from dyno.daemon.rpc_threads import RetiringThreadPool

pytestmark = pytest.mark.unit


class _Counting:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0

    def _work(self) -> None:
        """50 ms of a handler's work, counted as running meanwhile."""
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.05)
        with self.lock:
            self.now -= 1

    def unary(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        self._work()
        return request

    def stream(self, request: bytes, context: grpc.ServicerContext):  # type: ignore[no-untyped-def]
        self._work()
        yield request


@contextlib.contextmanager
def _channel(counting: _Counting, slots: int) -> Iterator[grpc.Channel]:
    """A channel to a real grpc server with HandlerSlots(slots), serving counting's handlers as t.T/Unary and
    t.T/Stream; the server stops after."""
    server = grpc.server(futures.ThreadPoolExecutor(32), interceptors=[HandlerSlots(slots)])
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(counting.unary),
        "Stream": grpc.unary_stream_rpc_method_handler(counting.stream),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.T", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield channel
    finally:
        server.stop(0)


def test_at_most_the_slots_run_unary_handlers_at_once() -> None:
    counting = _Counting()
    with _channel(counting, 2) as channel:
        call = channel.unary_unary("/t.T/Unary")
        answers = [call.future(b"x%d" % i, timeout=30) for i in range(16)]
        assert sorted(a.result() for a in answers) == sorted(b"x%d" % i for i in range(16))
    assert counting.most == 2


def test_streams_are_not_held_back() -> None:
    counting = _Counting()
    with _channel(counting, 1) as channel:
        call = channel.unary_stream("/t.T/Stream")
        streams = [call(b"s", timeout=30) for _ in range(8)]
        assert [list(s) for s in streams] == [[b"s"]] * 8
    assert counting.most > 1


def test_unary_calls_run_on_the_slots_own_pool_and_streams_on_the_servers() -> None:
    """The unary calls' pool (dyno.daemon.rpc_threads.RetiringThreadPool, which grpc takes only as a
    ThreadPoolExecutor): 40 server threads all running calls at once cost dynod more CPU per call than 8."""
    names: list[str] = []

    def unary(request: bytes, context: grpc.ServicerContext) -> bytes:
        names.append(threading.current_thread().name)
        return request

    def stream(request: bytes, context: grpc.ServicerContext):  # type: ignore[no-untyped-def]
        names.append(threading.current_thread().name)
        yield request

    pool = RetiringThreadPool(2, "unary-pool")
    server = grpc.server(RetiringThreadPool(8, "server-pool"), interceptors=[HandlerSlots(1, pool=pool)])
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.unary_stream_rpc_method_handler(stream),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.T", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            answers = [channel.unary_unary("/t.T/Unary").future(b"u%d" % i, timeout=30) for i in range(6)]
            assert sorted(a.result() for a in answers) == sorted(b"u%d" % i for i in range(6))
            assert list(channel.unary_stream("/t.T/Stream")(b"s", timeout=30)) == [b"s"]
        assert all(n.startswith("unary-pool_") for n in names[:6]) and names[6].startswith("server-pool_")
        assert pool.threads <= 2
    finally:
        server.stop(0)

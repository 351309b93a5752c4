"""dynod's health service (dyno.daemon.health): a Watch that ends while another is being answered is forgotten
without waiting for that answer, so it cannot freeze the gRPC server (grpc_health's HealthServicer can: its end
callback and its sends share one lock and the server's one completion-queue thread; grpc/grpc#43403)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from small_daemon import small_daemon

from dyno.daemon.app import DYNO_SERVICE
from dyno.daemon.health import HealthServicer

pytestmark = pytest.mark.unit

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class _Stream:
    """What Watch uses of grpc's ServicerContext, and the statuses it was sent."""

    def __init__(self, ended: bool = False) -> None:
        self.callbacks: list[Callable[[], None]] = []
        self.sent: list[int] = []
        self._ended = ended

    def add_callback(self, callback: Callable[[], None]) -> bool:
        if self._ended:
            return False
        self.callbacks.append(callback)
        return True

    def end(self) -> None:
        for callback in self.callbacks:
            callback()

    def send(self, response: Any) -> None:
        self.sent.append(response.status)


def _watch(servicer: HealthServicer, stream: _Stream, service: str = "", send: Any = None) -> None:
    servicer.Watch(health_pb2.HealthCheckRequest(service=service), stream, send or stream.send)  # type: ignore[arg-type]


def test_a_watch_that_ends_while_another_is_being_answered_is_forgotten_without_waiting() -> None:
    servicer = HealthServicer()
    first = _Stream()
    _watch(servicer, first)
    forgotten = threading.Event()

    def send_as_grpc_does(response: Any) -> None:
        # grpc's send returns once the completion-queue thread has handled it; that thread runs the first stream's
        # end callback before (grpc_health's servicer held its lock here, and that callback waited for it)
        cq_thread = threading.Thread(target=lambda: (first.end(), forgotten.set()), daemon=True)
        cq_thread.start()
        assert forgotten.wait(30), "the end callback waited for the servicer's lock: the server is deadlocked"

    _watch(servicer, _Stream(), send=send_as_grpc_does)
    servicer.set("", NOT_SERVING)
    assert first.sent == [SERVING]  # the ended stream is sent nothing more


def test_each_watcher_ends_with_the_latest_status_whatever_the_interleaving() -> None:
    servicer = HealthServicer()
    streams = [_Stream() for _ in range(16)]
    go = threading.Barrier(len(streams) + 1)

    def watch(stream: _Stream) -> None:
        go.wait()
        _watch(servicer, stream, DYNO_SERVICE)

    threads = [threading.Thread(target=watch, args=(s,)) for s in streams]
    for t in threads:
        t.start()
    go.wait()
    for i in range(200):
        servicer.set(DYNO_SERVICE, SERVING if i % 2 else NOT_SERVING)
    servicer.set(DYNO_SERVICE, SERVING)
    for t in threads:
        t.join()
    assert all(s.sent[-1] == SERVING for s in streams)
    assert all(a != b for s in streams for a, b in zip(s.sent, s.sent[1:], strict=False))  # none sent twice


def test_graceful_shutdown_tells_every_watcher_and_is_final() -> None:
    servicer = HealthServicer()
    servicer.set(DYNO_SERVICE, SERVING)
    overall, dyno, unknown = _Stream(), _Stream(), _Stream()
    _watch(servicer, overall)
    _watch(servicer, dyno, DYNO_SERVICE)
    _watch(servicer, unknown, "nope")
    servicer.enter_graceful_shutdown()
    servicer.set(DYNO_SERVICE, SERVING)  # too late: ignored
    assert overall.sent == dyno.sent == [SERVING, NOT_SERVING]
    assert unknown.sent == [health_pb2.HealthCheckResponse.SERVICE_UNKNOWN]


def test_a_watch_whose_stream_already_ended_is_not_kept() -> None:
    servicer = HealthServicer()
    gone = _Stream(ended=True)
    _watch(servicer, gone)
    servicer.set("", NOT_SERVING)
    assert gone.sent == []


def _channel(port: int) -> grpc.Channel:
    return grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])


def test_watches_ending_while_new_ones_start_never_stop_the_server() -> None:
    """grpc_health's servicer froze the server within a few hundred rounds of this (often in the first ten)."""
    with small_daemon("dyno-hw-") as daemon, _channel(daemon.port) as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        request = health_pb2.HealthCheckRequest(service=DYNO_SERVICE)
        for _ in range(500):
            watches = [stub.Watch(request, timeout=30) for _ in range(4)]
            assert [next(w).status for w in watches] == [SERVING] * 4
            for w in watches:
                w.cancel()
            fresh = stub.Watch(request, timeout=30)
            assert next(fresh).status == SERVING
            fresh.cancel()


def _leave_on_not_serving(port: int, service: str, serving: threading.Semaphore) -> None:
    """A client-side health checker: watches until the service is no longer SERVING, then ends its stream."""
    with _channel(port) as ch:
        call = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service=service), timeout=60)
        try:
            for response in call:
                if response.status != SERVING:
                    call.cancel()
                    return
                serving.release()
        except grpc.RpcError:
            pass


def test_dynod_stops_while_its_health_watchers_leave_on_not_serving() -> None:
    """Stop sends NOT_SERVING to each watcher in turn; the first ones leave at once. With grpc_health's servicer the
    stop often waited for ever (a script doing this with 16 watchers hung on its first stop, run after run)."""
    with small_daemon("dyno-hw-") as daemon:
        serving = threading.Semaphore(0)
        watchers = [
            threading.Thread(target=_leave_on_not_serving, args=(daemon.port, service, serving), daemon=True)
            for service in ("", DYNO_SERVICE)
            for _ in range(8)
        ]
        for w in watchers:
            w.start()
        for _ in watchers:
            assert serving.acquire(timeout=30)
        stopper = threading.Thread(target=daemon.stop, kwargs={"grace_s": 0}, daemon=True)
        stopper.start()
        stopper.join(60)  # a deadline for a hang, not a speed limit: the stop takes milliseconds
        assert not stopper.is_alive(), "Daemon.stop() did not return"
        for w in watchers:
            w.join(60)
        assert not any(w.is_alive() for w in watchers)  # every watcher saw NOT_SERVING (or its stream end)

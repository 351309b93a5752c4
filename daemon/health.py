"""dynod's gRPC health service (grpc.health.v1 Check and Watch): grpc_health's HealthServicer, without its deadlock.

grpc_health's servicer sends each Watch update while it holds its lock. A sync server's send waits until the server's
one completion-queue thread has handled it, and that thread also runs the end-of-stream callback of every Watch,
which takes the same lock. So one Watch ending while another was being answered (a new Watch's first status, or the
NOT_SERVING of dynod's stop) stopped that thread for good: no RPC of any kind was served again, server.stop().wait()
never returned, and the process could not exit (its exit joins the RPC thread stuck in the send). Any client that
reaches the port could do it. (grpc/grpc#43403; tests/unit/daemon/test_health.py.)

Here the lock guards the table only; sends happen outside it, one at a time per stream, and always send the stream's
latest status, so concurrent updates cannot leave a watcher with a stale one.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from dyno.daemon.rpc_abort import abort, reason_trailer

__all__ = ["HealthServicer"]

_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
_SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


class _Watch:
    """One Watch stream: the status it should have (set under HealthServicer's lock) and grpc's send callback,
    which blocks until the message is sent and allows one message in flight per stream."""

    def __init__(self, send: Callable[[Any], None], status: int) -> None:
        self._send = send
        self._sending = threading.Lock()
        self.latest = status
        self._sent: int | None = None
        self.ended = False

    def flush(self) -> None:
        """Send the latest status unless the stream has it already or has ended. Never call it holding the
        servicer's lock, nor on grpc's completion-queue thread (the send waits for that thread)."""
        with self._sending:
            status = self.latest
            if self.ended or status == self._sent:
                return
            self._send(health_pb2.HealthCheckResponse(status=status))
            self._sent = status


class HealthServicer(health_pb2_grpc.HealthServicer):
    """Check and Watch over a table of service -> status, as grpc_health.v1.health.HealthServicer (which it
    replaces) with experimental_non_blocking: a Watch holds no RPC thread between updates. For grpc's sync server.
    The overall service "" starts SERVING, as grpc_health's does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._status: dict[str, int] = {"": _SERVING}
        self._watches: dict[str, set[_Watch]] = {}
        self._shutting_down = False

    def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        with self._lock:
            status = self._status.get(request.service)
        if status is None:  # the health protocol's answer for an unknown service (a status, not an abort)
            context.set_trailing_metadata((reason_trailer(grpc.StatusCode.NOT_FOUND, ""),))
            context.set_code(grpc.StatusCode.NOT_FOUND)
            return health_pb2.HealthCheckResponse()
        return health_pb2.HealthCheckResponse(status=status)

    def Watch(  # type: ignore[override]  # grpc's non-blocking form: responses go through send_response_callback
        self,
        request: health_pb2.HealthCheckRequest,
        context: grpc.ServicerContext,
        send_response_callback: Callable[[Any], None] | None = None,
    ) -> None:
        if send_response_callback is None:  # only grpc's sync server, which passes it (experimental_non_blocking)
            abort(context, grpc.StatusCode.UNIMPLEMENTED, "Watch needs grpc's non-blocking server streaming")
        service = request.service
        with self._lock:
            watch = _Watch(send_response_callback, self._status.get(service, _SERVICE_UNKNOWN))
            self._watches.setdefault(service, set()).add(watch)
        # run by grpc when the stream ends, however it ends; False: it has ended already
        if not context.add_callback(functools.partial(self._end, service, watch)):
            self._end(service, watch)
            return
        watch.flush()

    def _end(self, service: str, watch: _Watch) -> None:
        """Forget an ended stream. Runs on grpc's completion-queue thread: it must never wait for a send."""
        with self._lock:
            watch.ended = True
            watchers = self._watches.get(service)
            if watchers is not None:
                watchers.discard(watch)
                if not watchers:
                    del self._watches[service]

    def _set_locked(self, service: str, status: int) -> list[_Watch]:
        self._status[service] = status
        watchers = list(self._watches.get(service, ()))
        for w in watchers:
            w.latest = status
        return watchers

    def set(self, service: str, status: int) -> None:
        """Set a service's status and send it to its watchers. Ignored after enter_graceful_shutdown()."""
        with self._lock:
            if self._shutting_down:
                return
            watchers = self._set_locked(service, status)
        for w in watchers:
            w.flush()

    def enter_graceful_shutdown(self) -> None:
        """Every service NOT_SERVING, for good (later set() calls are ignored), sent to every watcher."""
        with self._lock:
            if self._shutting_down:
                return
            self._shutting_down = True
            watchers = [w for service in list(self._status) for w in self._set_locked(service, _NOT_SERVING)]
        for w in watchers:
            w.flush()


# grpc's sync server reads these off the handler: Watch answers through send_response_callback on the server's pool
HealthServicer.Watch.experimental_non_blocking = True  # type: ignore[attr-defined]
HealthServicer.Watch.experimental_thread_pool = None  # type: ignore[attr-defined]

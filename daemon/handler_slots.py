"""At most HANDLER_SLOTS unary calls of the Dyno server run their handler at once; the others wait their turn blocked
on a semaphore, which holds no GIL.

Why: every thread that runs Python competes for the one GIL, and a thread that wants it waits about one switch
interval per competitor. With all 40 RPC threads running handlers under 50 callers, the libkineto endpoint's thread
(tracing.kineto_ipc), which must answer each poll within libkineto's ~90 ms, waits seconds for its turn
(bench/registry_scale.py). Queued here, the callers wait no longer in total (the work is the same and the GIL
serializes it anyway), and the endpoint competes with a handful of threads.
Streams are not gated: each holds its thread for its whole life (stream_slots.py bounds them) and works in short
steps.

Unary calls also run on a small pool of their own (`pool`, UNARY_THREADS threads), not on the server's 40 RPC threads
(which the streams need): under 50 callers back to back all 40 ran a call's receive and send steps at once, and their
handoffs and contention for the GIL cost dynod ~1.0 ms of CPU per call against ~0.8 ms with 8 threads
(bench/registry_scale.py, docs/BENCHMARKS.md). Queued calls wait in the pool's queue, holding no thread.
"""

from __future__ import annotations

import threading
from concurrent import futures
from typing import Any

import grpc

from dyno.daemon.handler_interceptor import HandlerInterceptor

__all__ = ["HANDLER_SLOTS", "HandlerSlots", "UNARY_THREADS"]

HANDLER_SLOTS = 4  # a few, so that a handler waiting on the disk does not stop the others
# the unary calls' own pool: the slots, and as many again for calls receiving their request or sending their answer
UNARY_THREADS = 2 * HANDLER_SLOTS


class HandlerSlots(HandlerInterceptor):
    """Runs each unary-unary handler while holding one of `slots` places, on `pool` when given (grpc runs a
    handler on its behavior's `experimental_thread_pool`, when that is a ThreadPoolExecutor; else on the server's).
    Put it before RequestDecoding, so that decoding happens inside the slot too."""

    def __init__(self, slots: int = HANDLER_SLOTS, pool: futures.ThreadPoolExecutor | None = None) -> None:
        self._slots = threading.BoundedSemaphore(slots)
        self._pool = pool

    def wrap(self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        if handler.request_streaming or handler.response_streaming:
            return handler
        inner = handler.unary_unary
        slots = self._slots

        def call(request: Any, context: grpc.ServicerContext) -> Any:
            with slots:
                return inner(request, context)

        if self._pool is not None:
            call.experimental_thread_pool = self._pool  # type: ignore[attr-defined]
        return grpc.unary_unary_rpc_method_handler(
            call, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )

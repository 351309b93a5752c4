"""At most HANDLER_SLOTS unary calls of the Dyno server run their handler at once; the others wait their turn blocked
on a semaphore, which holds no GIL.

Why: every thread that runs Python competes for the one GIL, and a thread that wants it waits about one switch
interval per competitor. With all 40 RPC threads running handlers under 50 callers, the libkineto endpoint's thread
(tracing.kineto_ipc), which must answer each poll within libkineto's ~90 ms, waits seconds for its turn
(bench/registry_scale.py). Queued here, the callers wait no longer in total (the work is the same and the GIL
serializes it anyway), and the endpoint competes with a handful of threads.
Streams are not gated: each holds its thread for its whole life (stream_slots.py bounds them) and works in short
steps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import grpc

__all__ = ["HANDLER_SLOTS", "HandlerSlots"]

HANDLER_SLOTS = 4  # a few, so that a handler waiting on the disk does not stop the others


class HandlerSlots(grpc.ServerInterceptor):
    """Runs each unary-unary handler while holding one of `slots` places. Put it before RequestDecoding, so that
    decoding happens inside the slot too."""

    def __init__(self, slots: int = HANDLER_SLOTS) -> None:
        self._slots = threading.BoundedSemaphore(slots)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None or handler.request_streaming or handler.response_streaming:
            return handler
        inner = handler.unary_unary
        slots = self._slots

        def call(request: Any, context: grpc.ServicerContext) -> Any:
            with slots:
                return inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            call, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )

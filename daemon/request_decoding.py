"""Every request of dynod's gRPC servers is decoded by dynod, in the handler, not by grpc.

Why: grpcio's sync server decodes a request with the handler's `request_deserializer` before the handler runs, and
when that fails it answers INTERNAL, logs an ERROR with a traceback, and keeps ~20 KB of the call for good (a bare
grpcio server does the same; grpc/grpc#36908, #34843 are of this family). Any local user who sends bodies that do not
decode (three bytes `08 ff ff` do) grew dynod by ~13 MB/s past its unit's MemoryMax, filled the journal, and after
64 such calls a connection served nothing more; a token-protected method answered INTERNAL before the token check.

`RequestDecoding` is a server interceptor that gives grpc every handler with no request deserializer (grpc passes
the raw bytes through) and parses them in the handler instead: a body that does not decode is answered
INVALID_ARGUMENT, logged as one throttled line, and the call ends as any refused call does. Installed last in the
interceptor list, it runs after the token check (dyno.daemon.auth), which therefore refuses an unauthorized call
without parsing its body. It covers every service a server serves (Dyno, Agent, health, reflection), streaming
requests included, so no servicer needs to know. `AioRequestDecoding` does the same on a grpc.aio server (the Agent
socket's, dyno.daemon.agent_service).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import grpc

from dyno.daemon.handler_interceptor import HandlerInterceptor
from dyno.daemon.rpc_abort import abort, reason_trailer
from dyno.error_reasons import ErrorReason
from dyno.logthrottle import ThrottledLog

__all__ = ["AioRequestDecoding", "RequestDecoding", "UNDECODABLE_MESSAGE"]

log = logging.getLogger(__name__)

# INVALID_ARGUMENT's message for a body that does not decode ("%s": the method)
UNDECODABLE_MESSAGE = "request: the body does not decode as %s's request message"

_Deserializer = Callable[[bytes], Any]
# grpc's sync server reads these off a handler's behavior (dyno.daemon.health's Watch sets them)
_BEHAVIOR_ATTRS = ("experimental_non_blocking", "experimental_thread_pool")


class RequestDecoding(HandlerInterceptor):
    """Serves each method's handler with raw request bytes in and the decoding inside it (module docstring). Put it
    last among a server's interceptors, so that every check before it sees the call before its body is parsed."""

    def __init__(self, *, log_every_s: float = 60.0) -> None:
        # any client can cause these at will: one WARNING per method and interval, the rest counted into the next
        self._refusals = ThrottledLog(log, every_s=log_every_s)

    def wrap(self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        if handler.request_deserializer is None:
            return handler  # raw bytes already
        return self._raw_handler(handler, details.method)

    def _decoder(self, deserialize: _Deserializer, method: str) -> Callable[[bytes, grpc.ServicerContext], Any]:
        def decode(raw: bytes, context: grpc.ServicerContext) -> Any:
            ok, request = _parse(deserialize, raw)
            if not ok:
                _refused(self._refusals, method)
                abort(
                    context,
                    grpc.StatusCode.INVALID_ARGUMENT,
                    UNDECODABLE_MESSAGE % method,
                    ErrorReason.UNDECODABLE_REQUEST,
                )
            return request

        return decode

    def _raw_handler(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        decode = self._decoder(handler.request_deserializer, method)
        if handler.request_streaming:

            def requests(raw_requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[Any]:
                for raw in raw_requests:
                    yield decode(raw, context)

            call = _decoding(_behavior(handler), requests)
        else:
            call = _decoding(_behavior(handler), decode)
        return _handler_kind(handler)(call, response_serializer=handler.response_serializer)


def _behavior(handler: grpc.RpcMethodHandler) -> Callable[..., Any]:
    """The one of `handler`'s four behaviors its kind sets."""
    if handler.request_streaming:
        return handler.stream_stream or handler.stream_unary  # type: ignore[no-any-return]
    return handler.unary_stream or handler.unary_unary  # type: ignore[no-any-return]


def _handler_kind(handler: grpc.RpcMethodHandler) -> Callable[..., grpc.RpcMethodHandler]:
    """grpc's constructor of a handler of `handler`'s kind (request and response streaming or not)."""
    return _HANDLER_KINDS[(handler.request_streaming, handler.response_streaming)]  # type: ignore[return-value]


_HANDLER_KINDS = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


def _parse(deserialize: _Deserializer, raw: bytes) -> tuple[bool, Any]:
    try:
        return True, deserialize(raw)
    except Exception:  # protobuf's DecodeError, or whatever a deserializer raises: the client's bytes
        return False, None


def _refused(refusals: ThrottledLog, method: str) -> None:
    refusals.warning(method, "refused a request to %s whose body does not decode (INVALID_ARGUMENT)", method)


def _decoding(behavior: Callable[..., Any], decode: Callable[[Any, grpc.ServicerContext], Any]) -> Callable[..., Any]:
    """`behavior` called with `decode(raw, context)` in place of its raw request (or request iterator). More
    arguments pass through: a non-blocking streaming handler's send callback."""

    def call(raw: Any, context: grpc.ServicerContext, *more: Any) -> Any:
        return behavior(decode(raw, context), context, *more)

    for attr in _BEHAVIOR_ATTRS:
        if hasattr(behavior, attr):
            setattr(call, attr, getattr(behavior, attr))
    return call


class AioRequestDecoding(grpc.aio.ServerInterceptor):
    """RequestDecoding for a grpc.aio server: its handlers are coroutines or async generators, and its context's
    abort is awaited."""

    def __init__(self, *, log_every_s: float = 60.0) -> None:
        self._refusals = ThrottledLog(log, every_s=log_every_s)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        return self._raw_handler(handler, handler_call_details.method)

    def _raw_handler(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        deserialize: _Deserializer = handler.request_deserializer
        refusals = self._refusals

        async def decode(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
            ok, request = _parse(deserialize, raw)
            if not ok:
                _refused(refusals, method)
                message = UNDECODABLE_MESSAGE % method
                trailer = reason_trailer(grpc.StatusCode.INVALID_ARGUMENT, message, ErrorReason.UNDECODABLE_REQUEST)
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, message, trailing_metadata=(trailer,))
            return request

        async def requests(raw_requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async for raw in raw_requests:
                yield await decode(raw, context)

        async def first(raw: Any, context: grpc.aio.ServicerContext) -> Any:
            return requests(raw, context) if handler.request_streaming else await decode(raw, context)

        behavior = _behavior(handler)
        if handler.response_streaming:

            async def stream(raw: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                responses = behavior(await first(raw, context), context)
                if inspect.isawaitable(responses):  # a coroutine that writes through the context
                    await responses
                    return
                async for response in responses:
                    yield response

            call: Callable[..., Any] = stream
        else:

            async def unary(raw: Any, context: grpc.aio.ServicerContext) -> Any:
                return await behavior(await first(raw, context), context)

            call = unary
        return _handler_kind(handler)(call, response_serializer=handler.response_serializer)

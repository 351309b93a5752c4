"""The base of dynod's sync server interceptors: each may replace the handler of a method grpc knows; a method grpc
does not know (no handler) passes through untouched, so that grpc answers it UNIMPLEMENTED."""

from __future__ import annotations

import abc
from collections.abc import Callable

import grpc

__all__ = ["HandlerInterceptor"]


class HandlerInterceptor(grpc.ServerInterceptor):
    """Subclasses say in `wrap` what serves a known method instead of (or as) its handler."""

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        return self.wrap(handler, handler_call_details)

    @abc.abstractmethod
    def wrap(self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        """The handler that serves the call `details` names, whose own handler is `handler`."""

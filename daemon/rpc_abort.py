"""``ServicerContext.abort`` typed as what it does (it always raises, so nothing after it runs), with the error's
machine-readable reason (dyno.error_reasons) in the standard ``grpc-status-details-bin`` trailer.

Typed: grpcio ships no type hints, so to mypy ``context.abort(...)`` returns and a servicer that aborts on a bad
request still seems to go on with a ``None``. Calling this instead lets mypy check the code that follows.
"""

from __future__ import annotations

from typing import Any, NoReturn

import grpc

from dyno.error_reasons import ErrorReason, details_trailer

__all__ = ["abort", "default_reason", "reason_trailer"]

_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: ErrorReason.INVALID_REQUEST,
    grpc.StatusCode.NOT_FOUND: ErrorReason.NOT_FOUND,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ErrorReason.LIMIT_REACHED,
    grpc.StatusCode.PERMISSION_DENIED: ErrorReason.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED: ErrorReason.UNAUTHENTICATED,
    grpc.StatusCode.FAILED_PRECONDITION: ErrorReason.FAILED_PRECONDITION,
    grpc.StatusCode.UNAVAILABLE: ErrorReason.UNAVAILABLE,
    grpc.StatusCode.UNIMPLEMENTED: ErrorReason.NOT_SUPPORTED,
}


def default_reason(code: grpc.StatusCode) -> ErrorReason:
    """The generic reason of a status code, for an error nothing more precise names."""
    return _BY_CODE.get(code, ErrorReason.INTERNAL)


def reason_trailer(code: grpc.StatusCode, details: str, reason: ErrorReason | None = None) -> tuple[str, bytes]:
    return details_trailer(code.value[0], details, reason or default_reason(code))


def abort(
    context: Any,
    code: grpc.StatusCode,
    details: str,
    reason: ErrorReason | None = None,
    *,
    metadata: tuple[tuple[str, str], ...] = (),
) -> NoReturn:
    """End the RPC with ``code``, ``details`` and ``reason`` (the code's generic one when None), plus `metadata` in
    the trailer (one call sets the whole trailer); raises, as ``context.abort`` does. `context`: a
    grpc.ServicerContext (a test's stand-in may lack set_trailing_metadata)."""
    set_trailer = getattr(context, "set_trailing_metadata", None)
    if set_trailer is not None:
        set_trailer((*metadata, reason_trailer(code, details, reason)))
    context.abort(code, details)
    raise AssertionError("grpc ServicerContext.abort returned")  # it raises; this keeps NoReturn true regardless

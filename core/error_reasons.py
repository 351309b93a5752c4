"""The machine-readable reason of every error status dynod returns: a `google.rpc.ErrorInfo` (domain "dyno.v1",
`reason` one of ErrorReason) in the standard `grpc-status-details-bin` trailer, beside the human message. Clients
branch on the reason, never on the message text (docs/API.md lists the reasons).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

__all__ = ["DETAILS_KEY", "DOMAIN", "ErrorReason", "details_trailer", "reason_of"]

DOMAIN = "dyno.v1"
DETAILS_KEY = "grpc-status-details-bin"


class ErrorReason(str, enum.Enum):
    """Stable names (UPPER_SNAKE_CASE, as ErrorInfo asks): add new ones, never rename one."""

    # generic, one per status code, when nothing more precise applies
    INVALID_REQUEST = "INVALID_REQUEST"
    NOT_FOUND = "NOT_FOUND"
    LIMIT_REACHED = "LIMIT_REACHED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    UNAVAILABLE = "UNAVAILABLE"
    NOT_SUPPORTED = "NOT_SUPPORTED"
    INTERNAL = "INTERNAL"
    # requests
    UNDECODABLE_REQUEST = "UNDECODABLE_REQUEST"
    TRACE_ID_IN_USE = "TRACE_ID_IN_USE"
    START_TIME_OUT_OF_RANGE = "START_TIME_OUT_OF_RANGE"  # the caller's clock and the daemon's disagree
    TOO_MANY_TRACES = "TOO_MANY_TRACES"
    TRACE_DIR_UNUSABLE = "TRACE_DIR_UNUSABLE"
    # a trace id or file this daemon cannot serve
    TRACE_NOT_FOUND = "TRACE_NOT_FOUND"
    TRACE_FORGOTTEN = "TRACE_FORGOTTEN"  # its folder is there without a record: the daemon restarted mid-trace
    NO_TRACE_FILE = "NO_TRACE_FILE"
    NOT_YOUR_PROCESS = "NOT_YOUR_PROCESS"  # another user's process or trace
    CALLER_UNKNOWN = "CALLER_UNKNOWN"  # the daemon cannot tell which local user calls
    SHUTTING_DOWN = "SHUTTING_DOWN"
    TRACING_DISABLED = "TRACING_DISABLED"
    # the agent socket (Register, Watch, ReportTrace)
    OTHER_PID_NAMESPACE = "OTHER_PID_NAMESPACE"
    NO_SUCH_PROCESS = "NO_SUCH_PROCESS"
    ALREADY_REGISTERED = "ALREADY_REGISTERED"
    TOO_MANY_UNWATCHED = "TOO_MANY_UNWATCHED"
    REGISTRY_FULL = "REGISTRY_FULL"
    NOT_REGISTERED = "NOT_REGISTERED"
    WRONG_SESSION = "WRONG_SESSION"
    JOB_OF_ANOTHER_USER = "JOB_OF_ANOTHER_USER"  # a process may not join a job whose processes are another user's


def details_trailer(code_value: int, message: str, reason: ErrorReason) -> tuple[str, bytes]:
    """The trailing-metadata entry that carries `reason` as a google.rpc.Status with one ErrorInfo; `code_value`:
    the gRPC status code's number (it must match the status the call ends with)."""
    from google.protobuf import any_pb2
    from google.rpc import error_details_pb2, status_pb2

    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason=reason.value, domain=DOMAIN))
    status = status_pb2.Status(code=code_value, message=message, details=[detail])
    return DETAILS_KEY, status.SerializeToString()


def reason_of(trailing_metadata: Iterable[tuple[str, Any]] | None) -> str:
    """The ErrorInfo reason of dyno's domain in a failed call's trailing metadata; "" when there is none (a daemon
    that sends no reason, or an error that did not come from dynod)."""
    from google.protobuf import message as pb_message
    from google.rpc import error_details_pb2, status_pb2

    for key, value in trailing_metadata or ():
        if key != DETAILS_KEY or not isinstance(value, bytes):
            continue
        status = status_pb2.Status()
        try:
            status.ParseFromString(value)
        except pb_message.DecodeError:
            return ""
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Is(info.DESCRIPTOR) and detail.Unpack(info) and info.domain == DOMAIN:
                return info.reason
    return ""

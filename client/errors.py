"""The client's exception hierarchy; grpc errors are translated here, once.

The classes load no grpc (dyno-cli's main catches DynoError for every command, `analyze` included, which calls no
daemon); ``translate`` imports it, called only once a call has failed and grpc is loaded anyway."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import grpc

__all__ = [
    "DynoError",
    "Unavailable",
    "InvalidArgument",
    "NotFound",
    "Unauthenticated",
    "PermissionDenied",
    "DeadlineExceeded",
    "ResourceExhausted",
    "FailedPrecondition",
    "Internal",
    "Unimplemented",
    "translate",
]


class DynoError(Exception):
    """Any failed call to a dyno daemon. `target` names the daemon; str() is one readable line."""

    def __init__(self, message: str, target: str = "", code: grpc.StatusCode | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.target = target
        self.code = code
        self.reason = reason  # the daemon's ErrorInfo reason (dyno.error_reasons), "" when it sent none

    def __str__(self) -> str:
        return f"{self.target}: {self.message}" if self.target else self.message


class Unavailable(DynoError):
    """The daemon cannot be reached (not running, wrong host/port, network)."""


class InvalidArgument(DynoError):
    pass


class NotFound(DynoError):
    pass


class Unauthenticated(DynoError):
    pass


class PermissionDenied(DynoError):
    pass


class DeadlineExceeded(DynoError):
    pass


class ResourceExhausted(DynoError):
    pass


class FailedPrecondition(DynoError):
    """The daemon cannot do it in its present state (e.g. its trace dir cannot be prepared: full, not writable)."""


class Internal(DynoError):
    """The daemon failed while answering (an unexpected error on its side; its log has the traceback)."""


class Unimplemented(DynoError):
    pass


@cache
def _by_code() -> dict[grpc.StatusCode, type[DynoError]]:
    import grpc

    return {
        grpc.StatusCode.UNAVAILABLE: Unavailable,
        grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
        grpc.StatusCode.NOT_FOUND: NotFound,
        grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
        grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
        grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
        grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
        grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
        grpc.StatusCode.INTERNAL: Internal,
        grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
        # A call dynod cut short while stopping ("Cancelling all calls" at the end of its drain grace): it may be
        # back in a moment (a restart), so callers that retry UNAVAILABLE retry this too. This client cancels its
        # own calls only when it is itself stopping (Ctrl-C), when nobody reads the error.
        grpc.StatusCode.CANCELLED: Unavailable,
    }


def translate(err: grpc.RpcError, target: str, *, tls: bool = False, token: bool = False) -> DynoError:
    """The DynoError for a failed call to `target`; `tls`: the channel was TLS, `token`: the call carried a bearer
    token (the same grpc details mean different mistakes with and without them)."""
    import grpc

    from dyno.client.reasons import is_reason
    from dyno.error_reasons import ErrorReason, reason_of

    code = err.code() if hasattr(err, "code") else None
    details = err.details() if hasattr(err, "details") else str(err)
    reason = reason_of(err.trailing_metadata()) if hasattr(err, "trailing_metadata") else ""
    cls = _by_code().get(code, DynoError) if code is not None else DynoError
    http_server = "Failed parsing HTTP/2" in details or "http2 header with status" in details
    if code == grpc.StatusCode.CANCELLED:
        message = f"dynod cancelled the call (stopping or restarting? try again once it is back): {details}"
    elif cls is Unavailable and not http_server:
        shutting_down = is_reason(reason, ErrorReason.SHUTTING_DOWN)
        message = _unavailable_message(details, tls, shutting_down)
    elif http_server:
        from dyno.client.hosts import DEFAULT_PORT

        # An HTTP/1 server (dynod's own Prometheus port is the usual one to mistake for it) or an HTTP proxy.
        message = (
            "something other than dynod answers there (an HTTP server? dynod's Prometheus --metrics-port is not "
            f"its gRPC --port, default {DEFAULT_PORT}): {details}"
        )
    elif cls is Unimplemented:
        message = f"the server there does not know this call (not a dynod, or an older one): {details}"
    elif cls is DeadlineExceeded:
        message = "dynod did not answer before the deadline"
    elif cls is Unauthenticated and token:  # "pass --auth-token-file" to someone who did sent them looking elsewhere
        message = (
            f"not authenticated: {details} (the token sent is not the daemon's: is --auth-token-file, or "
            "$DYNO_AUTH_TOKEN_FILE, the file dynod was started with?)"
        )
    elif cls is Unauthenticated:
        message = f"not authenticated: {details} (pass --auth-token-file or TLS options)"
    elif cls is InvalidArgument and is_reason(reason, ErrorReason.START_TIME_OUT_OF_RANGE):
        # the client computed the start a few seconds ahead by its own clock: refused as past or far future, the
        # two clocks disagree (the daemons allow 10 s in the past, libkineto's limit)
        message = (
            f"{details} (the start is this machine's clock + --start-delay-s: is its clock off from the daemon's? "
            "check NTP; --start-delay-s 0 sends no start time)"
        )
    else:
        message = details or (code.name if code else "call failed")
    return cls(message, target, code, reason)


def _unavailable_message(details: str, tls: bool, shutting_down: bool) -> str:
    """What an UNAVAILABLE most likely means, from grpc's details; `shutting_down`: the daemon's own answer."""
    lower = details.lower()
    if shutting_down:  # the daemon's own answer (a stream ended by its SIGTERM): it was reached
        return f"{details} (stopped or restarting; try again once it is back)"
    if "errors resolving" in lower or "dns resolution failed" in lower or "domain name not found" in lower:
        # "cannot reach dynod (is it running?)" sent the operator to a daemon when the name was mistyped
        return f"cannot resolve the host name (a typo, or a name this machine's DNS does not know?): {details}"
    if "wrong_version_number" in lower:  # a TLS client's hello answered by a plaintext HTTP/2 server
        return (
            "the server there does not speak TLS (a dynod started without --tls-cert? then leave out --tls-ca, "
            f"--tls-cert and --tls-key): {details}"
        )
    if "hostname verification" in lower:
        return (
            "TLS: dynod's certificate does not name the host dialled (reached by IP or another name? pass "
            f"--tls-server-name with a name the certificate has): {details}"
        )
    if "handshake" in lower:  # e.g. "Tls handshake failed ... CERTIFICATE_VERIFY"
        return (
            "TLS handshake with dynod failed (its certificate not signed by --tls-ca, a name other than "
            f"--tls-server-name, or a client certificate it refuses?): {details}"
        )
    if "Stream removed" in details or ("Socket closed" in details and "failed to connect" not in lower and not tls):
        # A connection that had worked (a --watch stream, a fetch) and broke: no TLS mismatch, which fails at connect
        # ("failed to connect to all addresses ... Socket closed"); the TLS hint sent the operator the wrong way.
        return (
            "lost the connection to dynod mid-call (it stopped, crashed or restarted? try again once it is back): "
            f"{details}"
        )
    if "Socket closed" in details:
        if tls:  # an mTLS daemon drops a client without a certificate (or with one of another CA) this way
            return (
                "dynod closed the connection during the TLS handshake: it wants a client certificate (--tls-cert and "
                f"--tls-key) signed by the CA of its own --tls-ca, and refuses none or one of another CA: {details}"
            )
        return f"dynod closed the connection (does it serve TLS? then pass --tls-ca): {details}"
    if "before receiving SETTINGS frame" in details:  # TCP accepted, but no HTTP/2 answer: something is listening
        return (
            "something accepts connections there but does not answer as a gRPC server (a hung dynod, or another "
            f"service on that port?): {details}"
        )
    return f"cannot reach dynod (is it running and listening there?): {details}"

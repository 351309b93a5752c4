"""Server-side auth for the Dyno service: TLS / mTLS credentials, a bearer-token interceptor for the RPCs that
start or cancel traces, read files or hold a live stream, and the refusal (or, when the operator insists, a loud
warning) of a daemon exposed beyond loopback without either.

Read-only unary RPCs (status, metrics, process list, trace state) stay open on purpose: they are what monitoring and
`dyno-cli status` across a fleet need. What of them a token protects is hidden from callers without it: the
processes' command lines (arguments can carry secrets), see REDACTED_METHODS.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import ssl
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

import grpc

from dyno import secretfiles
from dyno.daemon.config import ConfigError
from dyno.daemon.handler_interceptor import HandlerInterceptor
from dyno.daemon.rpc_abort import abort
from dyno.logthrottle import ThrottledLog
from dyno.v1 import dyno_pb2

__all__ = [
    "AUTH_METADATA_KEY",
    "AuthConfig",
    "HIDDEN_CMDLINE",
    "PROTECTED_METHODS",
    "REDACTED_METHODS",
    "UNAUTHENTICATED_MESSAGE",
    "AuthConfigError",
    "TokenAuthInterceptor",
    "build_server_credentials",
    "build_server_interceptors",
    "exposure_refusal",
    "is_loopback",
    "read_token_file",
    "warn_if_exposed",
]

log = logging.getLogger(__name__)

AUTH_METADATA_KEY = "authorization"
UNAUTHENTICATED_MESSAGE = "missing or invalid bearer token"
# StreamMetrics too: each live stream holds one of MAX_METRIC_STREAMS slots (and an RPC thread) for as long as its
# client wants, so without the token anyone who reaches the port could hold them all and leave the token holders'
# `dyno-cli metrics --watch` refused. GetMetrics (unary, the same samples) stays open for monitoring.
PROTECTED_METHODS: frozenset[str] = frozenset(
    {
        "/dyno.v1.Dyno/StartTrace",
        "/dyno.v1.Dyno/CancelTrace",
        "/dyno.v1.Dyno/FetchTraceFile",
        "/dyno.v1.Dyno/StreamMetrics",
    }
)
# What a caller without the token sees of a registered process's command line: that it is there, and why not it.
HIDDEN_CMDLINE = "(hidden: needs dynod's auth token)"


def _hide_cmdlines(
    response: dyno_pb2.ListProcessesResponse | bytes,
) -> dyno_pb2.ListProcessesResponse | bytes:
    """The answer with its command lines hidden; an encoded answer (dyno.daemon.server.add_to_server) stays one."""
    if isinstance(response, bytes):
        return _hide_cmdlines(dyno_pb2.ListProcessesResponse.FromString(response)).SerializeToString()  # type: ignore[union-attr]
    for p in response.processes:
        if p.cmdline:
            p.cmdline = HIDDEN_CMDLINE
    return response


# Open RPCs whose answers are edited for callers without the token (unary-unary only): a job's command line can
# carry secrets passed as arguments (API keys, database URLs), and any local user reaches 127.0.0.1.
REDACTED_METHODS: dict[str, Callable[[Any], Any]] = {"/dyno.v1.Dyno/ListProcesses": _hide_cmdlines}


class AuthConfig(Protocol):
    """The fields of DaemonConfig this module reads (a Protocol so tests can pass a small dataclass); read-only
    properties, so a frozen dataclass satisfies it."""

    @property
    def listen(self) -> str: ...
    @property
    def auth_token_file(self) -> Path | None: ...
    @property
    def tls_cert(self) -> Path | None: ...
    @property
    def tls_key(self) -> Path | None: ...
    @property
    def tls_ca(self) -> Path | None: ...
    @property
    def insecure_allow_unauthenticated_remote(self) -> bool: ...


class AuthConfigError(ConfigError):
    """An unusable token file or certificate; dynod prints it as one line and exits 2."""


def read_token_file(path: Path) -> str:
    """The shared token dynod requires (see dyno.secretfiles.read_token_file), errors as AuthConfigError."""
    try:
        return secretfiles.read_token_file(path)
    except secretfiles.SecretFileError as e:
        raise AuthConfigError(str(e)) from None


def _read_pem(path: Path, what: str) -> bytes:
    try:
        return secretfiles.read_pem(path, what)
    except secretfiles.SecretFileError as e:
        raise AuthConfigError(str(e)) from None


def build_server_credentials(config: AuthConfig) -> grpc.ServerCredentials | None:
    """TLS credentials from tls_cert/tls_key; with tls_ca, clients must present a certificate signed by it
    (mTLS). None when TLS is not configured (the server then uses an insecure port)."""
    if config.tls_cert is None and config.tls_key is None:
        if config.tls_ca is not None:
            raise AuthConfigError("tls_ca needs tls_cert and tls_key")
        return None
    if config.tls_cert is None or config.tls_key is None:
        raise AuthConfigError("tls_cert and tls_key must be given together")
    cert = _read_pem(config.tls_cert, "TLS certificate")
    key = _read_pem(config.tls_key, "TLS private key")
    ca = _read_pem(config.tls_ca, "TLS CA bundle") if config.tls_ca is not None else None
    _check_tls_files(config.tls_cert, config.tls_key, config.tls_ca)
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=ca is not None)


def _check_tls_files(cert: Path, key: Path, ca: Path | None) -> None:
    """Load the files with the ssl module first: gRPC only fails add_secure_port on a bad certificate, a key that
    is not the certificate's (or is encrypted) or a CA bundle without certificates, and says nothing of which."""
    for path, what in ((cert, "TLS certificate"), (ca, "TLS CA bundle")):
        if path is not None:
            try:
                ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=path)
            except (ssl.SSLError, OSError) as e:
                raise AuthConfigError(
                    f"{what} {path} holds no usable certificate ({getattr(e, 'reason', None) or e})"
                ) from None
    try:  # password b"": an encrypted key fails here instead of prompting on a terminal
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key, password=b"")
    except (ssl.SSLError, OSError) as e:
        if getattr(e, "reason", None) == "KEY_VALUES_MISMATCH":
            raise AuthConfigError(f"TLS private key {key} does not match the certificate {cert}") from None
        raise AuthConfigError(f"TLS private key {key} is not a usable unencrypted private key ({e})") from None


def _bearer(metadata: Iterable[tuple[str, Any]] | None) -> bytes | None:
    for key, value in metadata or ():
        if key.lower() == AUTH_METADATA_KEY:
            raw = value if isinstance(value, bytes) else str(value).encode("utf-8", "replace")
            scheme, _, token = raw.strip().partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" else None
    return None


class TokenAuthInterceptor(HandlerInterceptor):
    """Rejects calls to `protected` methods whose `authorization: Bearer <token>` metadata does not match, with
    UNAUTHENTICATED "missing or invalid bearer token"; answers `redacted` methods to such callers edited by their
    function. Other methods pass untouched."""

    def __init__(
        self,
        token: str,
        protected: Iterable[str] = PROTECTED_METHODS,
        redacted: dict[str, Callable[[Any], Any]] | None = None,
    ) -> None:
        if not token:
            raise ValueError("token must be non-empty")
        self._token = token.encode("utf-8")
        self._protected = frozenset(protected)
        self._redacted = dict(REDACTED_METHODS if redacted is None else redacted)
        # rejections are security events (WARNING) that any client can cause at will: one per method a minute,
        # the rest counted into the next one
        self._rejections = ThrottledLog(log, every_s=60.0)

    def authorized(self, metadata: Iterable[tuple[str, Any]] | None) -> bool:
        presented = _bearer(metadata)
        # compare_digest: the time taken does not reveal how much of a guess was right.
        return presented is not None and hmac.compare_digest(presented, self._token)

    def wrap(self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method = details.method
        redact = self._redacted.get(method)
        if method not in self._protected and redact is None:
            return handler
        if self.authorized(details.invocation_metadata):
            return handler
        if redact is not None:  # open to all, but not all of the answer
            return _redacting_handler(handler, redact)
        self._rejections.warning(method, "rejected %s: %s", method, UNAUTHENTICATED_MESSAGE)
        return _rejecting_handler(handler)


def _abort(request: Any, context: grpc.ServicerContext) -> Any:
    abort(context, grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE)


def _abort_stream(request: Any, context: grpc.ServicerContext) -> Any:
    abort(context, grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE)
    yield  # pragma: no cover - makes this a generator, as a streaming handler must be


def _redacting_handler(handler: grpc.RpcMethodHandler, redact: Callable[[Any], Any]) -> grpc.RpcMethodHandler:
    """`handler` (a unary-unary one) with its answer passed through `redact`."""
    inner = handler.unary_unary
    if inner is None:
        raise TypeError("only unary-unary methods can be redacted")

    def call(request: Any, context: grpc.ServicerContext) -> Any:
        return redact(inner(request, context))

    return grpc.unary_unary_rpc_method_handler(
        call, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
    )


def _rejecting_handler(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """A handler of the same shape as `handler` (so (de)serializers match) that aborts every call."""
    kw = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(_abort_stream, **kw)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(_abort, **kw)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(_abort_stream, **kw)
    return grpc.unary_unary_rpc_method_handler(_abort, **kw)


def build_server_interceptors(config: AuthConfig) -> list[grpc.ServerInterceptor]:
    """The interceptors dynod installs: the token check when auth_token_file is set, else none."""
    if config.auth_token_file is None:
        return []
    return [TokenAuthInterceptor(read_token_file(config.auth_token_file))]


def is_loopback(address: str) -> bool:
    """True for 127.0.0.0/8, ::1 and "localhost"; False for wildcards (0.0.0.0, ::, "") and anything else."""
    addr = address.strip().strip("[]")
    if addr.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(addr.split("%", 1)[0]).is_loopback
    except ValueError:
        return False  # a hostname: it resolves to something reachable from elsewhere


def _unauthenticated_remote(config: AuthConfig) -> bool:
    """Whether dynod listens beyond loopback with neither a token nor client certificates (mTLS)."""
    return config.auth_token_file is None and config.tls_ca is None and not is_loopback(config.listen)


def exposure_refusal(config: AuthConfig) -> str | None:
    """Why dynod must not start listening as configured (a configuration error, exit 2), or None: beyond loopback
    with neither a token nor client certificates (mTLS), a caller from another host cannot be identified, so anyone
    who reaches the port could trace every process and fetch every trace file. Allowed only when the operator says
    so by name (insecure_allow_unauthenticated_remote), with the warning of warn_if_exposed."""
    if not _unauthenticated_remote(config) or config.insecure_allow_unauthenticated_remote:
        return None
    return (
        f"listen {config.listen or 'all addresses'!r} is beyond loopback, and neither auth_token_file "
        "(--auth-token-file) nor mTLS (tls_cert, tls_key and tls_ca) is set: callers from other hosts could not be "
        "identified, and anyone who reaches the port could trace every process and fetch every trace file. Set one "
        "of them, listen on 127.0.0.1, or accept the exposure with --insecure-allow-unauthenticated-remote "
        "(insecure_allow_unauthenticated_remote = true)"
    )


def warn_if_exposed(config: AuthConfig, logger: logging.Logger | None = None) -> bool:
    """Log one loud warning when callers beyond loopback are not authenticated (listening there without a token or
    client certificates, mTLS; TLS without --tls-ca encrypts, but anyone who reaches the port may still start
    traces), and return whether it warned. dynod starts so only with insecure_allow_unauthenticated_remote
    (exposure_refusal). Local callers need neither: the kernel tells dynod who they are (dyno.daemon.callers)."""
    if not _unauthenticated_remote(config):
        return False
    out = logger or log
    if config.tls_cert is not None:
        out.warning(
            "SECURITY: listening on %s with TLS but neither --tls-ca (client certificates) nor --auth-token-file: "
            "TLS encrypts, but anyone who can reach this port can start traces in every process and download "
            "trace files. Add --auth-token-file or --tls-ca.",
            config.listen,
        )
        return True
    out.warning(
        "SECURITY: listening on %s without --auth-token-file or TLS: anyone who can reach this port can start "
        "traces in every process and download trace files. Configure --auth-token-file (or --tls-cert/--tls-key/"
        "--tls-ca for mTLS), or listen on 127.0.0.1.",
        config.listen or "all addresses",
    )
    return True

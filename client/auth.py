"""Client-side auth: a bearer token and/or TLS (with a client certificate for mTLS) for channels to dynod.

The token travels as `authorization: Bearer <token>` metadata added to every call by a client interceptor,
not as grpc call credentials: grpc only attaches call credentials to secure channels, and a plaintext channel
plus token is a supported set-up. Over plaintext the token is visible to anyone who can sniff the network, so
token-only auth is only safe on a trusted network; use TLS (`--tls-ca`) elsewhere.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from dyno import secretfiles

__all__ = ["AuthError", "ClientAuth", "MetadataInterceptor", "create_channel"]

_AUTH_KEY = "authorization"  # must match dyno.daemon.auth.AUTH_METADATA_KEY


class AuthError(ValueError):
    """Client auth settings that cannot be used (missing token file, bad PEM, cert without key). `path`: the file
    that cannot be used, None when the mistake is no one file's."""

    def __init__(self, message: str, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


@dataclass(frozen=True)
class ClientAuth:
    """What a client presents to dynod. Build it with `from_files`; hand it to DynoClient / Cluster.

    token: shared bearer token for StartTrace / CancelTrace / FetchTraceFile.
    tls_ca: PEM CA bundle that signed the daemons' certificates; setting it (or a client certificate) makes the
    channel TLS. tls_cert / tls_key: client certificate for mTLS. tls_server_name: name to check the server
    certificate against when it differs from the host name dialled (e.g. daemons reached by IP)."""

    token: str | None = None
    tls_ca: bytes | None = field(default=None, repr=False)
    tls_cert: bytes | None = field(default=None, repr=False)
    tls_key: bytes | None = field(default=None, repr=False)
    tls_server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise AuthError("--tls-cert and --tls-key must be given together")
        if self.token is not None and (not self.token or any(c.isspace() for c in self.token)):
            raise AuthError("the auth token must be one non-empty word")

    def __repr__(self) -> str:  # never print the token
        return (
            f"ClientAuth(token={'***' if self.token else None}, tls={self.secure}, "
            f"mtls={self.tls_cert is not None}, tls_server_name={self.tls_server_name!r})"
        )

    @classmethod
    def from_files(
        cls,
        *,
        token_file: Path | None = None,
        tls_ca: Path | None = None,
        tls_cert: Path | None = None,
        tls_key: Path | None = None,
        tls_server_name: str | None = None,
    ) -> ClientAuth:
        """Read the files named on the command line; raises AuthError with a one-line message."""
        try:
            return cls(
                token=secretfiles.read_token_file(token_file) if token_file is not None else None,
                tls_ca=secretfiles.read_pem(tls_ca, "TLS CA bundle") if tls_ca is not None else None,
                tls_cert=secretfiles.read_pem(tls_cert, "TLS client certificate") if tls_cert is not None else None,
                tls_key=secretfiles.read_pem(tls_key, "TLS client key") if tls_key is not None else None,
                tls_server_name=tls_server_name,
            )
        except secretfiles.SecretFileError as e:
            raise AuthError(str(e), e.path) from None

    @property
    def secure(self) -> bool:
        """Whether channels use TLS."""
        return self.tls_ca is not None or self.tls_cert is not None

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        """TLS channel credentials, or None for a plaintext channel. Without tls_ca the system roots are used."""
        if not self.secure:
            return None
        return grpc.ssl_channel_credentials(
            root_certificates=self.tls_ca, private_key=self.tls_key, certificate_chain=self.tls_cert
        )

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """Metadata to send with every call."""
        return ((_AUTH_KEY, f"Bearer {self.token}"),) if self.token else ()

    def channel_options(self) -> list[tuple[str, Any]]:
        if self.secure and self.tls_server_name:
            return [("grpc.ssl_target_name_override", self.tls_server_name)]
        return []

    def create_channel(self, target: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
        """A channel to `target` with TLS if configured and the token added to every call."""
        opts = [*options, *self.channel_options()]
        creds = self.channel_credentials()
        channel = grpc.secure_channel(target, creds, opts) if creds else grpc.insecure_channel(target, opts)
        md = self.metadata()
        return grpc.intercept_channel(channel, MetadataInterceptor(md)) if md else channel


def create_channel(target: str, auth: ClientAuth | None, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
    """A plaintext channel when `auth` is None, else `auth.create_channel`."""
    if auth is None:
        return grpc.insecure_channel(target, list(options))
    return auth.create_channel(target, options)


class _CallDetails(
    collections.namedtuple(
        "_CallDetails", ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")
    ),
    grpc.ClientCallDetails,
):
    pass


class MetadataInterceptor(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds fixed metadata (the bearer token) to every call, whatever its shape."""

    def __init__(self, metadata: Sequence[tuple[str, str]]) -> None:
        self._metadata = tuple(metadata)

    def _details(self, d: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        md = [*(d.metadata or ()), *self._metadata]
        return _CallDetails(
            d.method, d.timeout, md, d.credentials, getattr(d, "wait_for_ready", None), getattr(d, "compression", None)
        )

    def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return continuation(self._details(client_call_details), request)

    def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return continuation(self._details(client_call_details), request)

    def intercept_stream_unary(self, continuation: Any, client_call_details: Any, request_iterator: Any) -> Any:
        return continuation(self._details(client_call_details), request_iterator)

    def intercept_stream_stream(self, continuation: Any, client_call_details: Any, request_iterator: Any) -> Any:
        return continuation(self._details(client_call_details), request_iterator)

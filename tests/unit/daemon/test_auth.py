"""Auth: bearer-token interceptor, TLS / mTLS credentials and the exposure warning, against real grpc servers
on 127.0.0.1:0 serving the dyno.v1 Dyno service (the fake servicer). Certificates are made by the openssl CLI."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from tls_certs import have_openssl, make_test_certs

from dyno.client.auth import AuthError, ClientAuth, create_channel
from dyno.daemon.auth import (
    PROTECTED_METHODS,
    UNAUTHENTICATED_MESSAGE,
    AuthConfigError,
    TokenAuthInterceptor,
    build_server_credentials,
    build_server_interceptors,
    is_loopback,
    read_token_file,
    warn_if_exposed,
)
from dyno.daemon.config import DaemonConfig
from dyno.daemon.fake_server import FakeServer, start_fake_servers
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

pytestmark = pytest.mark.unit

TOKEN = "s3cret-token-0123456789abcdef"


def _token_file(tmp_path: Path, text: str = TOKEN + "\n", mode: int = 0o600) -> Path:
    p = tmp_path / "token"
    p.write_text(text)
    p.chmod(mode)
    return p


@pytest.fixture
def token_server(tmp_path: Path) -> Iterator[FakeServer]:
    cfg = DaemonConfig(auth_token_file=_token_file(tmp_path))
    (server,) = start_fake_servers(1, interceptors=build_server_interceptors(cfg))
    yield server
    server.stop()


def _stub(target: str, auth: ClientAuth | None) -> tuple[grpc.Channel, dyno_pb2_grpc.DynoStub]:
    channel = create_channel(target, auth)
    return channel, dyno_pb2_grpc.DynoStub(channel)


def _code(fn) -> tuple[grpc.StatusCode, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as info:
        fn()
    return info.value.code(), info.value.details()


# ---- token interceptor -------------------------------------------------------------------------------------------


def test_protected_methods_are_the_write_rpcs_and_the_live_stream() -> None:
    assert PROTECTED_METHODS == {
        "/dyno.v1.Dyno/StartTrace",
        "/dyno.v1.Dyno/CancelTrace",
        "/dyno.v1.Dyno/FetchTraceFile",
        "/dyno.v1.Dyno/StreamMetrics",  # its slots are few (test_security_rpc_exposure)
    }


@pytest.mark.parametrize("auth", [None, ClientAuth(token="wrong-token-0123456789")], ids=["missing", "wrong"])
def test_start_trace_without_valid_token_is_unauthenticated(token_server: FakeServer, auth: ClientAuth | None) -> None:
    channel, stub = _stub(token_server.target, auth)
    with channel:
        code, details = _code(lambda: stub.StartTrace(dyno_pb2.TraceRequest(job_id="job1"), timeout=5))
        assert (code, details) == (grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE)
        code, _ = _code(lambda: stub.CancelTrace(dyno_pb2.CancelTraceRequest(trace_id="t"), timeout=5))
        assert code == grpc.StatusCode.UNAUTHENTICATED
        # Server streaming: the rejection arrives when the stream is read.
        code, details = _code(
            lambda: list(stub.FetchTraceFile(dyno_pb2.FetchTraceFileRequest(trace_id="t", pid=1), timeout=5))
        )
        assert (code, details) == (grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE)
    assert token_server.servicer.calls == 0  # rejected before the servicer ran


def test_right_token_passes_all_protected_rpcs(token_server: FakeServer) -> None:
    channel, stub = _stub(token_server.target, ClientAuth(token=TOKEN))
    with channel:
        resp = stub.StartTrace(dyno_pb2.TraceRequest(job_id="job1", trace_id="t1"), timeout=5)
        assert resp.trace_id == "t1" and len(resp.triggered) == 2
        assert stub.CancelTrace(dyno_pb2.CancelTraceRequest(trace_id="t1"), timeout=5).trace_id == "t1"
        chunks = list(stub.FetchTraceFile(dyno_pb2.FetchTraceFileRequest(trace_id="t1", pid=1000), timeout=5))
        assert chunks[-1].last and chunks[-1].checksum.startswith("xxh3_128:")


def test_read_only_rpcs_stay_open(token_server: FakeServer) -> None:
    channel, stub = _stub(token_server.target, None)
    with channel:
        assert stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=5).hostname == f"fake-{token_server.port}"
        assert len(stub.ListProcesses(dyno_pb2.ListProcessesRequest(), timeout=5).processes) == 2
        assert stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id="t"), timeout=5).trace_id == "t"


@pytest.mark.parametrize(
    ("metadata", "ok"),
    [
        ([("authorization", f"Bearer {TOKEN}")], True),
        ([("authorization", f"bearer {TOKEN}")], True),  # scheme is case-insensitive (RFC 7235)
        ([("Authorization", f"Bearer  {TOKEN} ")], True),
        ([("authorization", f"Basic {TOKEN}")], False),
        ([("authorization", TOKEN)], False),
        ([("authorization", f"Bearer {TOKEN}x")], False),
        ([("authorization", f"Bearer {TOKEN[:-1]}")], False),
        ([("authorization", "Bearer ")], False),
        ([("x-token", TOKEN)], False),
        ([], False),
        (None, False),
    ],
)
def test_authorized_parses_bearer_metadata(metadata: list[tuple[str, str]] | None, ok: bool) -> None:
    assert TokenAuthInterceptor(TOKEN).authorized(metadata) is ok


def test_interceptor_needs_a_token() -> None:
    with pytest.raises(ValueError):
        TokenAuthInterceptor("")


def test_no_token_file_means_no_interceptor() -> None:
    assert build_server_interceptors(DaemonConfig()) == []


# ---- token files ---------------------------------------------------------------------------------------------------


def test_token_file_is_stripped(tmp_path: Path) -> None:
    assert read_token_file(_token_file(tmp_path, f"  {TOKEN}\n\n")) == TOKEN


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "is empty"), ("  \n", "is empty"), ("two words", "without spaces"), ("x" * 5000, "larger than")],
)
def test_bad_token_files(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(AuthConfigError, match=message):
        read_token_file(_token_file(tmp_path, text))


def test_missing_token_file(tmp_path: Path) -> None:
    with pytest.raises(AuthConfigError, match="does not exist"):
        read_token_file(tmp_path / "nope")
    with pytest.raises(AuthConfigError, match="is a directory"):
        read_token_file(tmp_path)


def test_world_readable_token_file_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        read_token_file(_token_file(tmp_path, mode=0o644))
    assert "readable by other users" in caplog.text and "chmod 600" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        read_token_file(_token_file(tmp_path, mode=0o600))
    assert caplog.text == ""


def test_short_token_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert read_token_file(_token_file(tmp_path, "abc")) == "abc"
    assert "only 3 characters" in caplog.text


# ---- exposure warning ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("listen", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("10.1.2.3", False),
        ("gpu001", False),
    ],
)
def test_is_loopback(listen: str, loopback: bool) -> None:
    assert is_loopback(listen) is loopback


def test_warn_if_exposed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert warn_if_exposed(DaemonConfig(listen="0.0.0.0")) is True
    assert "SECURITY" in caplog.text and "0.0.0.0" in caplog.text and "--auth-token-file" in caplog.text
    assert warn_if_exposed(DaemonConfig(listen="127.0.0.1")) is False  # local callers are identified (callers.py)
    assert warn_if_exposed(DaemonConfig(listen="0.0.0.0", auth_token_file=tmp_path / "t")) is False
    # TLS with client certificates (mTLS) authenticates; server-only TLS encrypts, yet anyone may start traces
    mtls = DaemonConfig(listen="::", tls_cert=tmp_path / "c", tls_key=tmp_path / "k", tls_ca=tmp_path / "ca")
    assert warn_if_exposed(mtls) is False
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert warn_if_exposed(DaemonConfig(listen="::", tls_cert=tmp_path / "c", tls_key=tmp_path / "k")) is True
    assert "SECURITY" in caplog.text and "encrypts" in caplog.text and "--tls-ca" in caplog.text


# ---- TLS and mTLS --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not have_openssl():
        pytest.skip("openssl CLI not available to make test certificates")
    return make_test_certs(tmp_path_factory.mktemp("certs"))


def _tls_server(certs: Path, *, mtls: bool, token_file: Path | None = None) -> FakeServer:
    cfg = DaemonConfig(
        tls_cert=certs / "server.pem",
        tls_key=certs / "server.key",
        tls_ca=certs / "ca.pem" if mtls else None,
        auth_token_file=token_file,
    )
    creds = build_server_credentials(cfg)
    assert creds is not None
    (server,) = start_fake_servers(1, credentials=creds, interceptors=build_server_interceptors(cfg))
    return server


def _status(target: str, auth: ClientAuth | None) -> dyno_pb2.Status:
    channel, stub = _stub(target, auth)
    with channel:
        return stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=5)


def test_tls_server(certs: Path) -> None:
    server = _tls_server(certs, mtls=False)
    try:
        auth = ClientAuth.from_files(tls_ca=certs / "ca.pem")
        assert _status(f"localhost:{server.port}", auth).hostname == f"fake-{server.port}"
        # Dialled by IP: the certificate's IP SAN matches; tls_server_name overrides the name checked.
        assert _status(server.target, auth).hostname
        assert _status(
            server.target, ClientAuth.from_files(tls_ca=certs / "ca.pem", tls_server_name="localhost")
        ).hostname
        # A plaintext client cannot talk to a TLS server.
        code, _ = _code(lambda: _status(server.target, None))
        assert code == grpc.StatusCode.UNAVAILABLE
    finally:
        server.stop()


def test_mtls_requires_a_client_certificate_from_the_ca(certs: Path) -> None:
    server = _tls_server(certs, mtls=True)
    try:
        good = ClientAuth.from_files(
            tls_ca=certs / "ca.pem", tls_cert=certs / "client.pem", tls_key=certs / "client.key"
        )
        assert _status(f"localhost:{server.port}", good).hostname == f"fake-{server.port}"
        no_cert = ClientAuth.from_files(tls_ca=certs / "ca.pem")
        code, _ = _code(lambda: _status(f"localhost:{server.port}", no_cert))
        assert code == grpc.StatusCode.UNAVAILABLE
        foreign = ClientAuth.from_files(
            tls_ca=certs / "ca.pem", tls_cert=certs / "other" / "client.pem", tls_key=certs / "other" / "client.key"
        )
        code, _ = _code(lambda: _status(f"localhost:{server.port}", foreign))
        assert code == grpc.StatusCode.UNAVAILABLE
    finally:
        server.stop()


def test_token_over_tls(certs: Path, tmp_path: Path) -> None:
    server = _tls_server(certs, mtls=False, token_file=_token_file(tmp_path))
    try:
        for token, ok in ((TOKEN, True), ("wrong-token-0123456789", False)):
            auth = ClientAuth(token=token, tls_ca=(certs / "ca.pem").read_bytes())
            channel, stub = _stub(f"localhost:{server.port}", auth)
            with channel:
                request = dyno_pb2.TraceRequest(job_id="job1")
                if ok:
                    assert stub.StartTrace(request, timeout=5).matched_pids == [1000, 1001]
                else:
                    code, _ = _code(lambda stub=stub, request=request: stub.StartTrace(request, timeout=5))
                    assert code == grpc.StatusCode.UNAUTHENTICATED
    finally:
        server.stop()


def test_server_credentials_errors(certs: Path, tmp_path: Path) -> None:
    assert build_server_credentials(DaemonConfig()) is None
    with pytest.raises(AuthConfigError, match="together"):
        build_server_credentials(DaemonConfig(tls_cert=certs / "server.pem"))
    with pytest.raises(AuthConfigError, match="does not exist"):
        build_server_credentials(DaemonConfig(tls_cert=tmp_path / "x.pem", tls_key=certs / "server.key"))
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(AuthConfigError, match="not a PEM file"):
        build_server_credentials(DaemonConfig(tls_cert=tmp_path / "junk.pem", tls_key=certs / "server.key"))


# ---- ClientAuth ----------------------------------------------------------------------------------------------------


def test_client_auth_never_shows_the_token() -> None:
    auth = ClientAuth(token=TOKEN)
    assert TOKEN not in repr(auth) and TOKEN not in str(auth)
    assert auth.metadata() == (("authorization", f"Bearer {TOKEN}"),)
    assert not auth.secure and auth.channel_credentials() is None


def test_client_auth_errors(tmp_path: Path, certs: Path) -> None:
    with pytest.raises(AuthError, match="together"):
        ClientAuth.from_files(tls_cert=certs / "client.pem")
    with pytest.raises(AuthError, match="does not exist"):
        ClientAuth.from_files(token_file=tmp_path / "missing")
    with pytest.raises(AuthError, match="is empty"):
        ClientAuth.from_files(token_file=_token_file(tmp_path, ""))
    assert ClientAuth.from_files(token_file=_token_file(tmp_path)).token == TOKEN


def test_tls_files_that_grpc_would_refuse_are_named_before_the_bind(certs: Path, tmp_path: Path) -> None:
    """A key that does not belong to the certificate, a PEM that holds no certificate, or a CA bundle without a
    usable certificate: gRPC only fails add_secure_port, which dynod reported as "cannot listen on ... (address in
    use or not available?)", sending the operator after a port conflict."""
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nZ2FyYmFnZQ==\n-----END CERTIFICATE-----\n")
    cert, key, other_key = certs / "server.pem", certs / "server.key", certs / "client.key"
    with pytest.raises(AuthConfigError, match=r"private key .*client.key does not match .*server.pem"):
        build_server_credentials(DaemonConfig(tls_cert=cert, tls_key=other_key))
    with pytest.raises(AuthConfigError, match=r"TLS certificate .*garbage.pem"):
        build_server_credentials(DaemonConfig(tls_cert=garbage, tls_key=key))
    with pytest.raises(AuthConfigError, match=r"TLS private key .*garbage.pem"):
        build_server_credentials(DaemonConfig(tls_cert=cert, tls_key=garbage))
    with pytest.raises(AuthConfigError, match=r"TLS CA bundle .*garbage.pem"):
        build_server_credentials(DaemonConfig(tls_cert=cert, tls_key=key, tls_ca=garbage))
    assert build_server_credentials(DaemonConfig(tls_cert=cert, tls_key=key, tls_ca=certs / "ca.pem")) is not None


def test_rejected_calls_are_logged_as_warnings_at_most_once_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    """Rejected calls are WARNING lines (the priority alerts watch), at most one a minute however many a
    script without the token (or a scanner) makes."""
    from types import SimpleNamespace

    interceptor = TokenAuthInterceptor(TOKEN)
    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: None)
    details = SimpleNamespace(method="/dyno.v1.Dyno/StartTrace", invocation_metadata=())
    with caplog.at_level(logging.DEBUG, logger="dyno.daemon.auth"):
        for _ in range(100):
            interceptor.intercept_service(lambda _d: handler, details)  # type: ignore[arg-type]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "StartTrace" in warnings[0].getMessage()

"""UNAVAILABLE, read from grpc's details, names the likely mistake instead of "cannot reach dynod (is it running and
listening there?)" for every case: a mistyped host name, an mTLS daemon dropping a client without a certificate,
a daemon answering that it is shutting down."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_context import FakeRpcError

from dyno.client import DynoClient
from dyno.client.cli import main as cli_main
from dyno.client.errors import FailedPrecondition, Internal, Unavailable, translate
from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve
from dyno.error_reasons import ErrorReason
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def test_a_name_that_does_not_resolve_says_so() -> None:
    e = translate(
        FakeRpcError(
            "errors resolving gpu0l7:1778: [field:hostname lookup error:address lookup failed for gpu0l7:1778: "
            "Domain name not found]"
        ),
        "gpu0l7:1778",
    )
    assert isinstance(e, Unavailable)
    assert "cannot resolve the host name" in str(e) and "is it running" not in str(e)


def test_socket_closed_on_a_tls_channel_asks_for_a_client_certificate() -> None:
    details = "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:1.2.3.4:1778: Socket closed"
    assert "--tls-cert" in str(translate(FakeRpcError(details), "h", tls=True))
    plain = str(translate(FakeRpcError(details), "h"))
    assert "then pass --tls-ca" in plain and "--tls-cert" not in plain


def test_a_daemon_shutting_down_is_not_called_unreachable() -> None:
    e = translate(FakeRpcError("dynod is shutting down", reason=ErrorReason.SHUTTING_DOWN), "h")
    assert isinstance(e, Unavailable)
    assert "shutting down" in str(e) and "cannot reach" not in str(e)


def test_a_listener_that_never_speaks_grpc_is_not_called_unreachable() -> None:
    """A port that accepts TCP but never answers HTTP/2 (a hung process, another service) is not asked "is it
    running and listening there?": something is listening."""
    e = translate(
        FakeRpcError(
            "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:39575: connection attempt "
            "timed out before receiving SETTINGS frame"
        ),
        "h",
    )
    assert "does not answer as a gRPC server" in str(e) and "is it running" not in str(e)


def test_a_start_time_refused_by_a_daemon_points_at_the_clocks() -> None:
    """The CLI computes the one absolute start by its own clock; a daemon whose clock is ahead by more than the
    delay + 10 s refused it with a bare "start_time_ms: must be within ..." (dyno.daemon.tracing.requests' text)."""
    refused = FakeRpcError(
        "start_time_ms: must be within 10 s in the past .. 3600 s in the future",
        grpc.StatusCode.INVALID_ARGUMENT,
        ErrorReason.START_TIME_OUT_OF_RANGE,
    )
    e = translate(refused, "h")
    assert "clock" in str(e) and "NTP" in str(e) and "--start-delay-s 0" in str(e)


def test_a_call_cut_short_by_a_stopping_dynod_is_unavailable_and_says_so() -> None:
    # server.stop() at the end of dynod's drain grace cancels calls in flight: a restart, so callers retry it
    err = translate(FakeRpcError("Cancelling all calls", grpc.StatusCode.CANCELLED), "h:1778")
    assert isinstance(err, Unavailable)
    assert "stopping or restarting" in err.message and "Cancelling all calls" in err.message
    other = translate(FakeRpcError("bad", grpc.StatusCode.INTERNAL), "h:1778")
    assert not isinstance(other, Unavailable) and type(other) is Internal  # named, and not retried as UNAVAILABLE


# dyno-cli against a dynod whose TLS it does not match: the message says TLS, not "cannot reach dynod".


def test_a_failed_tls_handshake_says_tls() -> None:
    e = translate(
        FakeRpcError(
            "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1778: Tls handshake failed "
            "(TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: error:1000007d:SSL routines:OPENSSL_internal:"
            "CERTIFICATE_VERIFY_FAILED: self signed certificate: OK"
        ),
        "gpu1:1778",
    )
    assert isinstance(e, Unavailable)
    assert "TLS handshake" in str(e) and "--tls-ca" in str(e) and "is it running" not in str(e)


def test_plaintext_to_a_tls_daemon_hints_at_tls() -> None:
    e = translate(
        FakeRpcError("failed to connect to all addresses; last error: UNAVAILABLE: ipv4:1.2.3.4:1778: Socket closed"),
        "h",
    )
    assert "--tls-ca" in str(e)


def test_connection_refused_still_asks_whether_it_runs() -> None:
    e = translate(FakeRpcError("failed to connect to all addresses; last error: Connection refused"), "h")
    assert "is it running and listening there?" in str(e) and "--tls-ca" not in str(e)


# A daemon's FAILED_PRECONDITION (trace dir cannot be prepared) and INTERNAL answers are named as such in stderr
# lines, tables and --json (`error_type`), as the other gRPC codes are.


PROBLEM = "cannot prepare the trace dir on this host: /var/tmp/dyno-traces/t1: No space left on device"


class TraceDirFull(FakeDynoServicer):
    def StartTrace(self, request, context):  # noqa: N802 - grpc method name
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, PROBLEM)

    def GetTrace(self, request, context):  # noqa: N802
        context.abort(grpc.StatusCode.INTERNAL, "Exception calling application: boom")


@pytest.fixture
def server() -> Iterator[FakeServer[TraceDirFull]]:
    srv = serve(lambda port: TraceDirFull(f"fake-{port}"))
    yield srv
    srv.server.stop(0)


def test_client_raises_the_named_classes(server) -> None:
    with DynoClient(server.target, timeout_s=2, retries=0) as client:
        with pytest.raises(FailedPrecondition, match="No space left on device"):
            client.start_trace(dyno_pb2.TraceRequest(job_id="j", duration_ms=100))
        with pytest.raises(Internal, match="boom"):
            client.get_trace("t1")


def test_trace_json_names_failed_precondition(server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(
        ["trace", "--host", server.target, "--job-id", "j", "--duration-ms", "100", "--start-delay-s", "0"]
        + ["--output-dir", str(tmp_path / "out"), "--json"]
    )
    out, err = capsys.readouterr()
    assert code == 1
    doc = json.loads(out)
    assert [h["error_type"] for h in doc["hosts"]] == ["FailedPrecondition"]
    assert f"{server.target}: {PROBLEM} (FailedPrecondition)" in err

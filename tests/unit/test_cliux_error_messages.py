"""UNAVAILABLE, read from grpc's details, names the likely mistake instead of "cannot reach dynod (is it running and
listening there?)" for every case: a mistyped host name, an mTLS daemon dropping a client without a certificate
(was: "then pass --tls-ca", already given), a daemon answering that it is shutting down."""

from __future__ import annotations

import grpc
import pytest
from grpc_context import FakeRpcError

from dyno.client.errors import Internal, Unavailable, translate

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
    e = translate(FakeRpcError("dynod is shutting down"), "h")
    assert isinstance(e, Unavailable)
    assert "shutting down" in str(e) and "cannot reach" not in str(e)


def test_a_listener_that_never_speaks_grpc_is_not_called_unreachable() -> None:
    """A port that accepts TCP but never answers HTTP/2 (a hung process, another service): "is it running and
    listening there?" was the wrong question, something is listening."""
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
    delay + 10 s refused it with a bare "start_time_ms: must be within ..." (the text of daemon.tracing.requests)."""
    refused = FakeRpcError(
        "start_time_ms: must be within 10 s in the past .. 3600 s in the future", grpc.StatusCode.INVALID_ARGUMENT
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

"""dyno-cli against a dynod whose TLS it does not match: "cannot reach dynod (is it running and listening
there?)" sent the operator to check a daemon that was running fine."""

from __future__ import annotations

import pytest
from grpc_context import FakeRpcError

from dyno.client.errors import Unavailable, translate

pytestmark = pytest.mark.unit


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

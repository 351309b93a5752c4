"""`dyno-cli metrics --watch` whose dynod dies (a crash, `systemctl restart`) after samples arrived says the
connection was lost mid-call, not a TLS hint for a connection that had worked. A real dynod killed under a real
`dyno-cli metrics --watch`."""

from __future__ import annotations

import signal

import pytest

from dyno.client.errors import translate

from conftest import Dynod, start_cli

pytestmark = pytest.mark.integration


def test_watch_reports_a_lost_daemon_not_a_tls_mismatch(dynod_factory) -> None:
    d: Dynod = dynod_factory()
    proc = start_cli("metrics", "--watch", "--json", "--host", d.target, "--names", "load_average_1m")
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # a sample arrived: the stream works
        assert '"load_average_1m"' in first
        d.proc.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 1, err
    assert "TLS" not in err and "tls" not in err, err
    assert f"dyno-cli: error: {d.target}: lost the connection to dynod mid-call" in err, err


class _Err(Exception):
    def __init__(self, details: str) -> None:
        self._details = details

    def code(self):  # noqa: ANN201 - grpc.RpcError's interface
        import grpc

        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return self._details


def test_a_connection_that_never_worked_keeps_the_tls_hint() -> None:
    never = translate(
        _Err("failed to connect to all addresses; last error: UNAVAILABLE: ipv4:1.2.3.4:1778: Socket closed"), "h:1"
    )  # type: ignore[arg-type]
    assert "does it serve TLS" in str(never)
    lost = translate(_Err("Socket closed"), "h:1")  # type: ignore[arg-type]
    assert "lost the connection to dynod mid-call" in str(lost)

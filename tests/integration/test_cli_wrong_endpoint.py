"""dyno-cli pointed at something that is not dynod's gRPC port gets one line that says so, not "cannot reach dynod
(is it running...?)" about a daemon that runs fine, and no grpc log lines around it:
- dynod's own Prometheus port (HTTP/1, the likeliest port mix-up) -> "something other than dynod answers there";
- a gRPC server without the Dyno service -> "does not know this call (not a dynod, or an older one)";
- --tls-ca against dynod's plaintext port: grpc logged every failed handshake attempt at INFO before the error."""

from __future__ import annotations

from concurrent import futures
from pathlib import Path

import grpc
import pytest

from conftest import run_cli

pytestmark = pytest.mark.integration


def _only_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_status_on_the_metrics_port_says_it_is_not_dynod(dynod) -> None:
    r = run_cli("status", "--host", f"127.0.0.1:{dynod.metrics_port}", "--timeout-s", "2")
    assert r.returncode == 1
    line = _only_line(r.stderr)
    assert "something other than dynod answers there" in line and "--metrics-port" in line, line
    assert "is it running" not in line


def test_status_on_another_grpc_server_says_it_is_not_dynod() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        r = run_cli("version", "--host", f"127.0.0.1:{port}", "--timeout-s", "2")
    finally:
        server.stop(0)
    assert r.returncode == 1
    assert "does not know this call (not a dynod, or an older one)" in _only_line(r.stderr)


def test_tls_against_a_plaintext_dynod_is_one_line(dynod, tmp_path: Path) -> None:
    tls_certs = pytest.importorskip("tls_certs")
    if not tls_certs.have_openssl():
        pytest.skip("needs the openssl CLI")
    certs = tls_certs.make_test_certs(tmp_path)
    r = run_cli("status", "--host", dynod.target, "--tls-ca", str(certs / "ca.pem"), "--timeout-s", "2")
    assert r.returncode == 1
    assert "does not speak TLS" in _only_line(r.stderr)  # WRONG_VERSION_NUMBER: a plaintext server (errors.py)

"""dyno-cli against an mTLS dynod with the wrong TLS options gets one line that names the client's mistake.

Before: no client certificate -> "does it serve TLS? then pass --tls-ca" although --tls-ca was given; a certificate
whose name is not the host dialled -> "cannot reach dynod (is it running...?)"; --tls-ca naming a key file, or a
key that is not the certificate's -> grpc's C++ errors on stderr and "TLS handshake with dynod failed"; --tls-ca
against a plaintext dynod -> "its certificate not signed by --tls-ca" (it has none)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Dynod, run_cli

pytestmark = pytest.mark.integration

tls_certs = pytest.importorskip("tls_certs")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not tls_certs.have_openssl():
        pytest.skip("needs the openssl CLI")
    return tls_certs.make_test_certs(tmp_path_factory.mktemp("cliux-certs"))


@pytest.fixture(scope="module")
def mtls_dynod(certs: Path) -> Iterator[Dynod]:
    d = Dynod(tls_certs.mtls_dynod_args(certs), metrics=False).start()
    yield d
    d.stop()
    d.cleanup()


def _only_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_tls_without_a_client_certificate_asks_for_one(mtls_dynod: Dynod, certs: Path) -> None:
    r = run_cli("status", "--host", mtls_dynod.target, "--tls-ca", str(certs / "ca.pem"), "--timeout-s", "3")
    assert r.returncode == 1
    line = _only_line(r.stderr)
    assert "client certificate" in line and "--tls-cert" in line, line
    assert "then pass --tls-ca" not in line


def test_a_certificate_not_naming_the_host_says_so(mtls_dynod: Dynod, certs: Path) -> None:
    r = run_cli(
        "status",
        "--host", mtls_dynod.target,
        "--tls-ca", str(certs / "ca.pem"),
        "--tls-cert", str(certs / "client.pem"),
        "--tls-key", str(certs / "client.key"),
        "--tls-server-name", "not-in-the-certificate.example",
        "--timeout-s", "3",
    )  # fmt: skip
    assert r.returncode == 1
    line = _only_line(r.stderr)
    assert "does not name the host" in line and "--tls-server-name" in line, line
    assert "is it running" not in line


def test_a_key_file_given_as_tls_ca_is_a_usage_error(mtls_dynod: Dynod, certs: Path) -> None:
    r = run_cli("status", "--host", mtls_dynod.target, "--tls-ca", str(certs / "client.key"), "--timeout-s", "3")
    assert r.returncode == 2
    line = _only_line(r.stderr)  # and none of grpc's "ssl_transport_security.cc" lines
    assert line.startswith("dyno-cli: error: --tls-ca") and "certificate" in line, line


def test_a_key_that_is_not_the_certificates_is_a_usage_error(mtls_dynod: Dynod, certs: Path) -> None:
    r = run_cli(
        "trace",
        "--host", mtls_dynod.target,
        "--tls-ca", str(certs / "ca.pem"),
        "--tls-cert", str(certs / "client.pem"),
        "--tls-key", str(certs / "server.key"),
        "--job-id", "j", "--duration-ms", "100", "--output-dir", str(certs / "out"),
    )  # fmt: skip
    assert r.returncode == 2
    line = _only_line(r.stderr)
    assert "--tls-cert" in line and "--tls-key" in line and "mismatch" in line.lower(), line
    assert not (certs / "out").exists()


def test_the_right_options_still_work(mtls_dynod: Dynod, certs: Path) -> None:
    r = run_cli(
        "version",
        "--host", mtls_dynod.target,
        "--tls-ca", str(certs / "ca.pem"),
        "--tls-cert", str(certs / "client.pem"),
        "--tls-key", str(certs / "client.key"),
        "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert '"ok": true' in r.stdout


def test_tls_against_a_plaintext_dynod_says_it_is_plaintext(dynod: Dynod, certs: Path) -> None:
    r = run_cli("status", "--host", dynod.target, "--tls-ca", str(certs / "ca.pem"), "--timeout-s", "2")
    assert r.returncode == 1
    line = _only_line(r.stderr)
    assert "does not speak TLS" in line and "leave out --tls-ca" in line, line
    assert "not signed by --tls-ca" not in line


def test_a_client_certificate_of_another_ca_is_said_to_be_refused(mtls_dynod: Dynod, certs: Path) -> None:
    r = run_cli(
        "status",
        "--host", mtls_dynod.target,
        "--tls-ca", str(certs / "ca.pem"),
        "--tls-cert", str(certs / "other" / "client.pem"),
        "--tls-key", str(certs / "other" / "client.key"),
        "--timeout-s", "3",
    )  # fmt: skip
    assert r.returncode == 1
    line = _only_line(r.stderr)
    assert "one of another CA" in line and "then pass --tls-ca" not in line, line

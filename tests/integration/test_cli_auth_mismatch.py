"""dyno-cli against a dynod whose TLS options or token it does not match gets one line that names the client's
mistake: no client certificate, a certificate whose name is not the host dialled, --tls-ca naming a key file or a key
that is not the certificate's, --tls-ca against a plaintext dynod, a token that is not the daemon's."""

from __future__ import annotations

import os
import subprocess
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
    d.close()


def _client_tls(certs: Path, cert: str = "client.pem", key: str = "client.key") -> tuple[str, ...]:
    """The options of a client trusting the test CA and presenting `cert` and `key` (paths under `certs`)."""
    return ("--tls-ca", str(certs / "ca.pem"), "--tls-cert", str(certs / cert), "--tls-key", str(certs / key))


def _status(d: Dynod, *options: str, timeout_s: str = "3") -> subprocess.CompletedProcess[str]:
    """`dyno-cli status` of `d` with `options`."""
    return run_cli("status", "--host", d.target, *options, "--timeout-s", timeout_s)


def _only_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def test_tls_without_a_client_certificate_asks_for_one(mtls_dynod: Dynod, certs: Path) -> None:
    r = _status(mtls_dynod, "--tls-ca", str(certs / "ca.pem"))
    assert r.returncode == 1
    line = _only_line(r.stderr)
    assert "client certificate" in line and "--tls-cert" in line, line
    assert "then pass --tls-ca" not in line


def test_a_certificate_not_naming_the_host_says_so(mtls_dynod: Dynod, certs: Path) -> None:
    r = _status(mtls_dynod, *_client_tls(certs), "--tls-server-name", "not-in-the-certificate.example")
    assert r.returncode == 1
    line = _only_line(r.stderr)
    assert "does not name the host" in line and "--tls-server-name" in line, line
    assert "is it running" not in line


def test_a_key_file_given_as_tls_ca_is_a_usage_error(mtls_dynod: Dynod, certs: Path) -> None:
    r = _status(mtls_dynod, "--tls-ca", str(certs / "client.key"))
    assert r.returncode == 2
    line = _only_line(r.stderr)  # and none of grpc's "ssl_transport_security.cc" lines
    assert line.startswith("dyno-cli: error: --tls-ca") and "certificate" in line, line


def test_a_key_that_is_not_the_certificates_is_a_usage_error(mtls_dynod: Dynod, certs: Path) -> None:
    r = run_cli(
        "trace",
        "--host", mtls_dynod.target,
        *_client_tls(certs, key="server.key"),
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
        *_client_tls(certs),
        "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert '"ok": true' in r.stdout


def test_tls_against_a_plaintext_dynod_says_it_is_plaintext(dynod: Dynod, certs: Path) -> None:
    r = _status(dynod, "--tls-ca", str(certs / "ca.pem"), timeout_s="2")
    assert r.returncode == 1
    line = _only_line(r.stderr)
    assert "does not speak TLS" in line and "leave out --tls-ca" in line, line
    assert "not signed by --tls-ca" not in line


def test_a_client_certificate_of_another_ca_is_said_to_be_refused(mtls_dynod: Dynod, certs: Path) -> None:
    r = _status(mtls_dynod, *_client_tls(certs, cert="other/client.pem", key="other/client.key"))
    assert r.returncode == 1
    line = _only_line(r.stderr)
    assert "one of another CA" in line and "then pass --tls-ca" not in line, line


# `dyno-cli trace` with a token that is not the daemon's: the error says the token differs; without a token it
# still says to pass one.


def _token_file(path: Path, token: str) -> Path:
    path.write_text(token + "\n")
    os.chmod(path, 0o600)
    return path


def test_a_wrong_token_is_called_wrong_and_a_missing_one_missing(dynod_factory, tmp_path: Path) -> None:
    d = dynod_factory("--auth-token-file", str(_token_file(tmp_path / "daemon.token", "d" * 32)), metrics=False)
    wrong = _token_file(tmp_path / "mine.token", "m" * 32)
    common = ["trace", "--host", d.target, "--job-id", "j", "--duration-ms", "100"]

    r = run_cli(*common, "--output-dir", str(tmp_path / "a"), "--auth-token-file", str(wrong))
    assert r.returncode == 1
    line = next(x for x in r.stderr.splitlines() if "Unauthenticated" in x)
    assert "not the daemon's" in line and "pass --auth-token-file" not in line, line

    r = run_cli(*common, "--output-dir", str(tmp_path / "b"), env={"DYNO_AUTH_TOKEN_FILE": ""})
    assert r.returncode == 1
    line = next(x for x in r.stderr.splitlines() if "Unauthenticated" in x)
    assert "pass --auth-token-file" in line, line
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()

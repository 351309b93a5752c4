"""Test certificates made with the openssl CLI: a CA, a server certificate for localhost / 127.0.0.1, a client
certificate, and a client certificate from another CA (to show it is refused)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

__all__ = ["have_openssl", "make_test_certs"]

_EC = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")


def have_openssl() -> bool:
    return shutil.which("openssl") is not None


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(d: Path, name: str) -> None:
    _openssl(
        "req",
        "-x509",
        *_EC,
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        f"/CN={name}",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        cwd=d,
    )


def _issue(d: Path, name: str, ext: str) -> None:
    _openssl("req", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    (d / f"{name}.ext").write_text(ext)
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        f"{name}.pem",
        "-days",
        "2",
        "-extfile",
        f"{name}.ext",
        cwd=d,
    )


def make_test_certs(d: Path) -> Path:
    """Writes ca.pem, server.pem/.key, client.pem/.key and other/client.pem/.key (foreign CA) into `d`."""
    _ca(d, "dyno-test-ca")
    _issue(d, "server", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    _issue(d, "client", "extendedKeyUsage=clientAuth\n")
    other = d / "other"
    other.mkdir()
    _ca(other, "other-ca")
    _issue(other, "client", "extendedKeyUsage=clientAuth\n")
    return d


def mtls_dynod_args(certs: Path) -> list[str]:
    """dynod's flags for mutual TLS with the certificates `make_test_certs` wrote: its certificate and key, and the
    CA its clients' certificates must be signed by."""
    return [
        "--tls-cert", str(certs / "server.pem"),
        "--tls-key", str(certs / "server.key"),
        "--tls-ca", str(certs / "ca.pem"),
    ]  # fmt: skip

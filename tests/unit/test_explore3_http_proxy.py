"""dyno-cli with `https_proxy` / `http_proxy` in the environment (set on many login nodes for pip and curl): grpc sent
every call to the daemons through that proxy, so a running dynod was reported as "cannot reach dynod (is it running
and listening there?)" with the proxy's address in the error. Daemons are reached directly now; `grpc_proxy`, grpc's
own variable, still sends them through a proxy for whoever needs one. Against a real gRPC server on a free loopback
port, with a proxy address where nothing listens."""

from __future__ import annotations

import socket

import pytest

from dyno.client import DynoClient, DynoError

pytestmark = pytest.mark.unit


@pytest.fixture
def dead_proxy() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("variable", ["https_proxy", "http_proxy", "HTTPS_PROXY"])
def test_a_web_proxy_in_the_environment_is_not_used(fake_dynod, dead_proxy, monkeypatch, variable: str) -> None:
    for name in ("grpc_proxy", "no_proxy", "no_grpc_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, dead_proxy)
    with DynoClient(fake_dynod.target, timeout_s=3, retries=0) as client:
        assert client.status().hostname == f"fake-{fake_dynod.port}"


def test_grpc_proxy_still_sends_calls_through_a_proxy(fake_dynod, dead_proxy, monkeypatch) -> None:
    for name in ("no_proxy", "no_grpc_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("grpc_proxy", dead_proxy)
    with DynoClient(fake_dynod.target, timeout_s=2, retries=0) as client, pytest.raises(DynoError):
        client.status()

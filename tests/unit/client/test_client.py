"""`DynoClient("HOST:PORT")` checks its target as dyno-cli checks --host: a port out of range is refused (grpc would
dial it modulo 65536) and a target without a port gets dynod's 1778, not grpc's default 443. Against a real gRPC
server on a free loopback port."""

from __future__ import annotations

import socket

import pytest

from dyno.client import DynoClient, DynoError
from dyno.client.hosts import HostSpecError

pytestmark = pytest.mark.unit


def test_a_port_past_65535_is_refused_not_wrapped_onto_another_server(fake_dynod) -> None:
    wrapped = f"127.0.0.1:{fake_dynod.port + 65536}"  # what grpc dialled: fake_dynod.port itself
    with pytest.raises(HostSpecError, match=r"outside 1-65535"):
        DynoClient(wrapped, timeout_s=2, retries=0)


def test_the_right_target_still_answers_and_names_itself(fake_dynod) -> None:
    with DynoClient(f"127.0.0.1:{fake_dynod.port}", timeout_s=2, retries=0) as client:
        assert client.status().hostname == f"fake-{fake_dynod.port}"
        assert client.target == f"127.0.0.1:{fake_dynod.port}"


def test_a_target_without_port_gets_dynods_port_not_grpcs_443() -> None:
    with DynoClient("127.0.0.1", timeout_s=1, retries=0) as client:
        assert client.target == "127.0.0.1:1778"
    with DynoClient("[::1]", timeout_s=1, retries=0) as client:
        assert client.target == "[::1]:1778"


def test_grpc_schemes_are_passed_through(tmp_path) -> None:
    for target in (f"unix:{tmp_path}/d.sock", "dns:///localhost:1778", "ipv4:127.0.0.1:1778"):
        with DynoClient(target, timeout_s=1, retries=0) as client:
            assert client.target == target


def test_a_url_is_refused_with_the_host_port_to_give() -> None:
    with pytest.raises(HostSpecError, match=r"is a URL: give HOST\[:PORT\], e.g. gpu7:1778"):
        DynoClient("http://gpu7:1778")


# dyno-cli with `https_proxy` / `http_proxy` in the environment reaches the daemons directly; `grpc_proxy`, grpc's own
# variable, still sends them through a proxy.


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

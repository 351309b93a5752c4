"""dyno-cli's choice of dynod's Unix socket for the local host: only for localhost/127.0.0.1/::1 at the default
port, only where a daemon answers, DYNO_API_SOCKET first; and a real call through it keeps naming the host."""

from __future__ import annotations

from pathlib import Path

import pytest
from small_daemon import small_daemon

from dyno.client.cluster import open_client
from dyno.client.hosts import DEFAULT_PORT, Host
from dyno.client.local_socket import SYSTEM_API_SOCKET, api_socket_candidates, local_target

pytestmark = pytest.mark.unit


def test_only_the_local_host_at_the_default_port() -> None:
    env = {"DYNO_API_SOCKET": "/x/dyno.sock"}
    yes = lambda path: True  # noqa: E731
    for name in ("localhost", "127.0.0.1", "::1", "LOCALHOST"):
        assert local_target(Host(name, DEFAULT_PORT), env, yes) == "unix:/x/dyno.sock", name
    assert local_target(Host("127.0.0.1", 1779), env, yes) is None
    assert local_target(Host("node7", DEFAULT_PORT), env, yes) is None
    assert local_target(Host("127.0.0.1", DEFAULT_PORT), env, lambda path: False) is None  # nobody answers: TCP


def test_candidates() -> None:
    assert api_socket_candidates({"DYNO_API_SOCKET": " /a/b.sock "}) == (Path("/a/b.sock"),)
    assert api_socket_candidates({})[-1] == SYSTEM_API_SOCKET


def test_a_client_of_the_local_host_calls_through_the_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    with small_daemon("dyno-localsock-") as daemon:
        monkeypatch.setenv("DYNO_API_SOCKET", str(daemon.config.api_socket_path))
        client = open_client(Host("localhost", DEFAULT_PORT))
        try:
            assert client.target == f"localhost:{DEFAULT_PORT}"  # it still names the host it was asked for
            assert client.status().pid == daemon.status().pid  # answered, though nothing listens on TCP 1778 here
        finally:
            client.close()

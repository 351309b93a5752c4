"""dyno.default_paths: where a dynod of this user (or root's, the systemd unit's) has its sockets by default, the one
place dynod's configuration and the clients (agent, dyno-cli) take them from."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dyno import default_paths
from dyno.daemon.config import DaemonConfig

pytestmark = pytest.mark.unit


def test_root_uses_the_system_runtime_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert default_paths.default_agent_socket() == default_paths.SYSTEM_AGENT_SOCKET == Path("/run/dyno/agent.sock")
    assert default_paths.default_api_socket() == default_paths.SYSTEM_API_SOCKET == Path("/run/dyno/dyno.sock")
    assert default_paths.default_state_dir() == Path("/var/lib/dyno")


def test_a_user_gets_xdg_runtime_dir_else_the_state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    assert default_paths.default_agent_socket() == tmp_path / "run" / "dyno" / "agent.sock"
    assert default_paths.default_api_socket() == tmp_path / "run" / "dyno" / "dyno.sock"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert default_paths.default_state_dir() == tmp_path / "state" / "dyno"
    assert default_paths.default_agent_socket() == tmp_path / "state" / "dyno" / "run" / "agent.sock"


def test_a_relative_xdg_dir_still_gives_an_absolute_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "relative/run")
    assert default_paths.default_agent_socket().is_absolute()
    assert default_paths.default_api_socket().is_absolute()


@pytest.mark.parametrize("euid", [0, 1000])
def test_dynod_defaults_are_these(monkeypatch: pytest.MonkeyPatch, euid: int) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    cfg = DaemonConfig()
    assert cfg.agent_socket_path == default_paths.default_agent_socket()
    assert cfg.api_socket_path == default_paths.default_api_socket()

"""Where the agent looks for its daemon when no socket is given: a dynod of the trainer's own user (its runtime dir)
and the system dynod (/run/dyno/agent.sock, the systemd unit run as root), whichever listens. A non-root trainer
looked only in its own runtime dir and silently never registered with a root dynod. Real listening Unix sockets,
and a real Agent service (dynod's Tracing) for the agent."""

from __future__ import annotations

import logging
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from dyno.client.agent import Agent
from dyno.client.agent import env as agent_env
from dyno.daemon.config import DaemonConfig
from dyno.daemon.tracing.subsystem import Tracing

from conftest import short_tmpdir, wait_for

pytestmark = pytest.mark.unit


@pytest.fixture
def dirs(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """(the user's default socket, the system default socket), both in a fresh short temp dir, nothing there."""
    root = short_tmpdir("dyno-sock-")
    user, system = root / "user" / "agent.sock", root / "system" / "agent.sock"
    user.parent.mkdir()
    system.parent.mkdir()
    monkeypatch.setattr(agent_env, "_user_default_socket", lambda: user)
    monkeypatch.setattr(agent_env, "SYSTEM_AGENT_SOCKET", system)
    monkeypatch.delenv(agent_env.ENV_SOCKET, raising=False)
    yield user, system
    shutil.rmtree(root, ignore_errors=True)


def _listen(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.listen(4)
    return s


def _stale(path: Path) -> None:
    """A socket file nothing listens on (a daemon that died without removing it)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()
    assert path.exists()


def test_given_socket_is_the_only_candidate(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    given = tmp_path / "a.sock"
    assert agent_env.socket_candidates(given, {"DYNO_AGENT_SOCKET": "/x/b.sock"}) == (given,)
    assert agent_env.socket_candidates(None, {"DYNO_AGENT_SOCKET": " /x/b.sock "}) == (Path("/x/b.sock"),)
    assert agent_env.resolve_socket_path(None, {"DYNO_AGENT_SOCKET": "/x/b.sock"}) == Path("/x/b.sock")  # unprobed


def test_default_candidates_are_the_users_then_the_systems(dirs: tuple[Path, Path]) -> None:
    user, system = dirs
    assert agent_env.socket_candidates(None, {}) == (user, system)


def test_root_has_one_default_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    # For root the daemon's own default is the system one: tried once.
    monkeypatch.setattr(agent_env, "_user_default_socket", lambda: agent_env.SYSTEM_AGENT_SOCKET)
    assert agent_env.socket_candidates(None, {}) == (Path("/run/dyno/agent.sock"),)


def test_the_users_own_default_is_still_the_daemons(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert agent_env._user_default_socket() == DaemonConfig().agent_socket_path


def test_nothing_there_picks_the_users_default(dirs: tuple[Path, Path]) -> None:
    user, _ = dirs
    assert agent_env.resolve_socket_path(None, {}) == user


def test_only_the_system_daemon_listens(dirs: tuple[Path, Path]) -> None:
    user, system = dirs
    with _listen(system):
        assert agent_env.accepts_connection(system) and not agent_env.accepts_connection(user)
        assert agent_env.resolve_socket_path(None, {}) == system
        _stale(user)  # a stale socket file of the user's own daemon does not hide the live system daemon
        assert not agent_env.accepts_connection(user)
        assert agent_env.resolve_socket_path(None, {}) == system


def test_the_users_own_daemon_comes_first_when_both_listen(dirs: tuple[Path, Path]) -> None:
    user, system = dirs
    with _listen(system), _listen(user):
        assert agent_env.resolve_socket_path(None, {}) == user


def test_a_socket_file_that_exists_beats_a_missing_one(dirs: tuple[Path, Path]) -> None:
    user, system = dirs
    _stale(system)  # e.g. the system dynod restarting
    assert agent_env.resolve_socket_path(None, {}) == system


def test_agent_without_a_socket_registers_with_the_system_daemon(
    dirs: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    user, system = dirs
    caplog.set_level(logging.WARNING, logger="dyno.client.agent.connection")
    agent = Agent("sockjob", min_backoff_s=0.05, max_backoff_s=0.1).start()
    tracing = None
    try:
        # No daemon yet: the warning names every path tried, and how to point the agent elsewhere.
        wait_for(lambda: any("no dyno daemon" in r.getMessage() for r in caplog.records), 10)
        message = next(r.getMessage() for r in caplog.records if "no dyno daemon" in r.getMessage())
        assert f"unix:{user} or unix:{system}" in message and "DYNO_AGENT_SOCKET" in message
        cfg = DaemonConfig(
            trace_dir=system.parent / "traces", agent_socket=system, kineto_endpoint="off", state_dir=system.parent
        )
        tracing = Tracing(cfg, "hostS")
        tracing.start()
        assert agent.wait_registered(15), "the agent never found the system daemon"
        assert agent.socket_path == system
        assert [r.job_id for r in tracing.registry.list()] == ["sockjob"]
    finally:
        agent.stop()
        if tracing is not None:
            tracing.stop()


def test_the_system_socket_is_the_root_default_of_dynods_config() -> None:
    from dyno.daemon import config

    assert agent_env.SYSTEM_AGENT_SOCKET == config.SYSTEM_RUNTIME_DIR / config.AGENT_SOCKET_NAME


@pytest.mark.parametrize("named", [False, True], ids=["one default (root)", "named by DYNO_AGENT_SOCKET"])
def test_the_no_daemon_warning_hints_at_the_variable_unless_it_named_the_socket(
    named: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A root trainer tries one default path (/run/dyno/agent.sock): its warning left out how to point the agent at
    a dynod elsewhere, as if the path had been chosen. When DYNO_AGENT_SOCKET chose it, the hint would repeat it."""
    only = tmp_path / "agent.sock"
    monkeypatch.setattr(agent_env, "_user_default_socket", lambda: only)
    monkeypatch.setattr(agent_env, "SYSTEM_AGENT_SOCKET", only)
    if named:
        monkeypatch.setenv(agent_env.ENV_SOCKET, str(only))
    else:
        monkeypatch.delenv(agent_env.ENV_SOCKET, raising=False)
    caplog.set_level(logging.WARNING, logger="dyno.client.agent.connection")
    agent = Agent("hintjob", min_backoff_s=0.05, max_backoff_s=0.1).start()
    try:
        wait_for(lambda: any("no dyno daemon" in r.getMessage() for r in caplog.records), 10)
    finally:
        agent.stop()
    message = next(r.getMessage() for r in caplog.records if "no dyno daemon" in r.getMessage())
    assert f"no dyno daemon at unix:{only} (" in message
    assert ("set DYNO_AGENT_SOCKET to the daemon's --agent-socket" in message) is not named

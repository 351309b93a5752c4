"""Where a dynod puts its sockets and state by default: shared by dynod's configuration and the clients (the trainer
agent and dyno-cli look for a local daemon at the same places, `accepts_connection` telling whether one listens).
Standard library only: the agent imports it in every trainer, dyno-cli in every command."""

from __future__ import annotations

import os
import socket
from pathlib import Path

__all__ = [
    "AGENT_SOCKET_NAME",
    "API_SOCKET_NAME",
    "SYSTEM_AGENT_SOCKET",
    "SYSTEM_API_SOCKET",
    "SYSTEM_RUNTIME_DIR",
    "accepts_connection",
    "default_agent_socket",
    "default_api_socket",
    "default_runtime_dir",
    "default_state_dir",
]

SYSTEM_RUNTIME_DIR = Path("/run/dyno")  # root's runtime dir (the systemd unit's); the agent tries it too
AGENT_SOCKET_NAME = "agent.sock"
API_SOCKET_NAME = "dyno.sock"  # the Dyno API's Unix socket, beside the agent socket (dyno-cli's first choice locally)
SYSTEM_AGENT_SOCKET = SYSTEM_RUNTIME_DIR / AGENT_SOCKET_NAME
SYSTEM_API_SOCKET = SYSTEM_RUNTIME_DIR / API_SOCKET_NAME


def default_state_dir() -> Path:
    # Root gets the FHS location; a normal user a directory it can write without set-up.
    if os.geteuid() == 0:
        return Path("/var/lib/dyno")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "dyno"


def default_runtime_dir() -> Path:
    if os.geteuid() == 0:
        return SYSTEM_RUNTIME_DIR
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    return Path(xdg) / "dyno" if xdg else default_state_dir() / "run"


def default_agent_socket() -> Path:
    """The agent socket of a dynod of this process's user run without --agent-socket; absolute even when $XDG_* is
    relative."""
    return Path(os.path.abspath(default_runtime_dir() / AGENT_SOCKET_NAME))


def default_api_socket() -> Path:
    """The Dyno API socket of such a dynod: beside its agent socket."""
    return default_agent_socket().parent / API_SOCKET_NAME


def accepts_connection(path: Path, timeout_s: float = 0.5) -> bool:
    """Whether something listens on the Unix socket at path (a stale socket file refuses the connection)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True

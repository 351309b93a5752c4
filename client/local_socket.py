"""dynod's Unix socket for the Dyno API (its api_socket), which dyno-cli dials for the local host: there the kernel
tells dynod which user calls, and a user who is no admin of a root dynod sees and traces their own processes.

Used for `localhost`, `127.0.0.1` and `::1` at dynod's default port, when a daemon answers on the socket:
DYNO_API_SOCKET when set, else the default of a dynod run by this user (dyno.sock beside its agent socket), then the
system dynod's (/run/dyno/dyno.sock). Otherwise, or for any other host or port, TCP as given.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from dyno import default_paths
from dyno.client.hosts import DEFAULT_PORT, Host
from dyno.default_paths import accepts_connection  # not the agent's env module: that loads the agent package

__all__ = ["ENV_API_SOCKET", "SYSTEM_API_SOCKET", "api_socket_candidates", "local_target"]

ENV_API_SOCKET = "DYNO_API_SOCKET"
SYSTEM_API_SOCKET = default_paths.SYSTEM_API_SOCKET  # the systemd unit's dynod (dynod as root)
_LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def api_socket_candidates(env: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """Where the local dynod's API socket may be, in order of preference."""
    env = os.environ if env is None else env
    if env.get(ENV_API_SOCKET, "").strip():
        return (Path(env[ENV_API_SOCKET].strip()),)
    own = default_paths.default_api_socket()
    return (own,) if own == SYSTEM_API_SOCKET else (own, SYSTEM_API_SOCKET)


def local_target(
    host: Host,
    env: Mapping[str, str] | None = None,
    listening: Callable[[Path], bool] = accepts_connection,
) -> str | None:
    """ "unix:PATH" to dial for `host` when it is the local host at the default port and a daemon answers on one of
    the candidate sockets; None: dial the host as given."""
    if host.name.lower() not in _LOCAL_NAMES or host.port != DEFAULT_PORT:
        return None
    return next((f"unix:{path}" for path in api_socket_candidates(env) if listening(path)), None)

"""Whether a TCP listener can bind host:port, asked with a plain socket before gRPC is: gRPC's C core logs its own
"add_port.cc ... Failed to add port" line on stderr when a bind fails (its log level is read once, at its start,
from GRPC_VERBOSITY, so it cannot be lowered around one call without hiding its real run-time errors too), and
its exception says only "Failed to bind ...; set GRPC_VERBOSITY=debug". The plain socket gets the same answer
with the OS's reason, so dynod can refuse in one line before gRPC tries.

The check binds as gRPC's listeners do: SO_REUSEADDR on (a previous dynod's connections in TIME_WAIT do not block
the port), no SO_REUSEPORT (dynod turns it off), any one of the resolved addresses is enough, and a wildcard
address is the IPv6 dual-stack one or, failing that, the IPv4 one. The socket is closed before gRPC binds: a
program taking the port in between still makes gRPC fail, with its own log line, as before. The same for a Unix
socket's path (`unix_bind_error`), and the whole preparation of a public one (`prepare_public_socket`: the agent
socket, the API socket).
"""

from __future__ import annotations

import errno
import os
import socket
import stat
from pathlib import Path

from dyno.daemon.trusted_dirs import dir_problem

__all__ = ["MAX_UNIX_SOCKET_PATH", "SocketInUseError", "bind_problem", "prepare_public_socket", "unix_bind_error"]

MAX_UNIX_SOCKET_PATH = 107  # sockaddr_un.sun_path holds 108 bytes, the terminating NUL included

_WILDCARDS = ("0.0.0.0", "::")
_HINTS = {
    errno.EADDRINUSE: "another program listens on that port, perhaps another dynod: stop it or choose another port",
    errno.EADDRNOTAVAIL: "no interface of this host has that address",
    errno.EACCES: "ports below 1024 need root or CAP_NET_BIND_SERVICE",
}


def _candidates(host: str, port: int) -> list[tuple[int, tuple[str, int]]]:
    if host in _WILDCARDS:
        return [(socket.AF_INET6, ("::", port)), (socket.AF_INET, ("0.0.0.0", port))]
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    return list(dict.fromkeys((int(family), (str(addr[0]), port)) for family, _t, _p, _c, addr in infos))


def _try_bind(family: int, addr: tuple[str, int]) -> None:
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and addr[0] == "::":
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)  # gRPC's wildcard listener is dual-stack
        s.bind(addr)


def bind_problem(host: str, port: int) -> str | None:
    """Why no listener can be bound on host:port, in a few words ("Address already in use (...)"), or None when
    one of its addresses can be bound."""
    try:
        candidates = _candidates(host, port)
    except (socket.gaierror, UnicodeError) as e:  # UnicodeError: an IDNA label over 63 characters
        reason = e.strerror if isinstance(e, socket.gaierror) and e.strerror else str(e)
        return f"cannot resolve {host!r}: {reason}"
    first: OSError | None = None
    for family, addr in candidates:
        try:
            _try_bind(family, addr)
        except OSError as e:
            first = first or e
            continue
        return None
    if first is None:  # getaddrinfo answered nothing, which it does not do without an error
        return f"{host!r} resolves to no address"
    hint = _HINTS.get(first.errno or 0)
    return f"{first.strerror or first}" + (f" ({hint})" if hint else "")


def unix_bind_error(path: Path) -> OSError | None:
    """The OS's error binding a Unix socket at `path` (a read-only or virtual filesystem, permissions), or None
    when it can be bound; the probe's socket file is removed again."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.bind(str(path))
        except OSError as e:
            return e
    path.unlink(missing_ok=True)
    return None


class SocketInUseError(OSError):
    """Another live daemon serves this socket."""


def prepare_public_socket(path: Path, *, what: str, key: str) -> None:
    """Make `path`'s folder (0755) and remove a stale socket file there, so that `path` can be bound. OSError, its
    message naming `what` (e.g. "agent socket") and the path, when the path is too long, its folder can be changed
    by other users (`key`: the config key to fix) or not made, the path is not a socket, it cannot be bound
    (gRPC's own bind failure says neither the path nor why); SocketInUseError when another daemon answers on it."""
    if len(os.fsencode(path)) > MAX_UNIX_SOCKET_PATH:
        raise OSError(
            errno.ENAMETOOLONG, f"{what} path {path} is too long for a Unix socket (> {MAX_UNIX_SOCKET_PATH} bytes)"
        )
    # Whoever could rename entries in its folder could put a socket of their own in its place: callers would talk
    # to it (trainers would take their trace requests, output paths included, from it).
    problem = dir_problem(path.parent, what=f"the {what}'s folder", key=key, shared=True)
    if problem is not None:
        raise OSError(errno.EPERM, problem)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    except OSError as e:
        why = "it exists and is not a directory" if e.errno == errno.EEXIST else e.strerror
        raise OSError(e.errno, f"cannot create the {what}'s directory {path.parent}: {why}") from None
    try:
        st = path.lstat()
    except FileNotFoundError:
        _probe_bind(path, what)
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise OSError(errno.EEXIST, f"{what} path {path} exists and is not a socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink(missing_ok=True)  # nobody listens: stale from a crashed daemon
            _probe_bind(path, what)
            return
    raise SocketInUseError(errno.EADDRINUSE, f"{what} {path} is in use by another live daemon")


def _probe_bind(path: Path, what: str) -> None:
    err = unix_bind_error(path)
    if err is not None:
        raise OSError(err.errno, f"cannot bind the {what} {path}: {err.strerror}")

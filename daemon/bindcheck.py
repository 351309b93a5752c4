"""Whether a TCP listener can bind host:port, asked with a plain socket before gRPC is: gRPC's C core logs its own
"add_port.cc ... Failed to add port" line on stderr when a bind fails (its log level is read once, at its start,
from GRPC_VERBOSITY, so it cannot be lowered around one call without hiding its real run-time errors too), and
its exception says only "Failed to bind ...; set GRPC_VERBOSITY=debug". The plain socket gets the same answer
with the OS's reason, so dynod can refuse in one line before gRPC tries.

The check binds as gRPC's listeners do: SO_REUSEADDR on (a previous dynod's connections in TIME_WAIT do not block
the port), no SO_REUSEPORT (dynod turns it off), any one of the resolved addresses is enough, and a wildcard
address is the IPv6 dual-stack one or, failing that, the IPv4 one. The socket is closed before gRPC binds: a
program taking the port in between still makes gRPC fail, with its own log line, as before. The same for a Unix
socket's path (`unix_bind_error`).
"""

from __future__ import annotations

import errno
import socket
from pathlib import Path

__all__ = ["bind_problem", "unix_bind_error"]

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

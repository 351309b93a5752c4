"""Which local user is at the other end of a gRPC call: the kernel's word, never the caller's.

grpc tells a servicer only the peer's address (`context.peer()`), never its credentials (no SO_PEERCRED,
grpc/grpc#15511). Two ways from that address to a uid:

- loopback (or any local) TCP: the connecting socket is one of this host's, and Linux lists its owner in
  /proc/net/tcp and /proc/net/tcp6 (the uid that created it); the peer's ip:port is that socket's local end.
- dynod's Unix sockets: dyno.daemon.unix_front accepts the connection itself, reads SO_PEERCRED, and relays it to
  the gRPC server from a socket bound to a fresh abstract name, which it records in a PeerTable; grpc reports that
  name as the peer ("unix-abstract:NAME").

Anything else (a remote host, a connection gone before the lookup, another network namespace) is not identified.
"""

from __future__ import annotations

import ipaddress
import secrets
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PeerCred",
    "PeerTable",
    "TcpPeer",
    "parse_tcp_peer",
    "tcp_socket_owner",
    "PROC_NET",
]

PROC_NET = Path("/proc/net")
_ESTABLISHED = "01"
# grpc's peer texts (grpc_sockaddr_to_uri)
_ABSTRACT = "unix-abstract:"


@dataclass(frozen=True)
class PeerCred:
    """What the kernel said of a Unix socket's peer when it connected (SO_PEERCRED)."""

    pid: int
    uid: int
    gid: int


@dataclass(frozen=True)
class TcpPeer:
    address: ipaddress.IPv4Address | ipaddress.IPv6Address
    port: int


def _plain(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An IPv4-mapped IPv6 address (::ffff:127.0.0.1, a dual-stack socket's view) as the IPv4 address it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def parse_tcp_peer(peer: str) -> TcpPeer | None:
    """grpc's "ipv4:127.0.0.1:5555" / "ipv6:[::1]:5555" (percent-encoded scope ids too) as a TcpPeer; None for
    anything else."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return None
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return None
    host = host.strip("[]").replace("%25", "%").split("%", 1)[0]
    try:
        return TcpPeer(_plain(ipaddress.ip_address(host)), int(port))
    except ValueError:
        return None


def _hex_address(text: str) -> TcpPeer | None:
    """/proc/net/tcp{,6}'s "0100007F:1F90": the address as 32-bit words in host (little-endian) order, the port big."""
    addr, _, port = text.partition(":")
    try:
        raw = bytes.fromhex(addr)
        packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
        ip = ipaddress.ip_address(packed)
        return TcpPeer(_plain(ip), int(port, 16))
    except ValueError:
        return None


def _lines(proc_net: Path) -> Iterable[str]:
    for name in ("tcp", "tcp6"):
        try:
            with open(proc_net / name, encoding="ascii", errors="replace") as f:
                next(f, None)  # the header
                yield from f
        except OSError:
            continue


def tcp_socket_owner(peer: TcpPeer, server_port: int, proc_net: Path = PROC_NET) -> int | None:
    """The uid owning the established local socket whose local end is `peer` and whose remote end is port
    `server_port` (dynod's): the user who connected. None when there is none (a remote peer, a connection closed
    meanwhile) or more than one owner matches (never trusted)."""
    owners: set[int] = set()
    for line in _lines(proc_net):
        parts = line.split()
        if len(parts) < 8 or parts[3] != _ESTABLISHED:
            continue
        local, remote = _hex_address(parts[1]), _hex_address(parts[2])
        if local != peer or remote is None or remote.port != server_port:
            continue
        try:
            owners.add(int(parts[7]))
        except ValueError:
            return None
    return owners.pop() if len(owners) == 1 else None


class PeerTable:
    """Abstract socket name -> the credentials of the Unix-socket client whose connection it relays (unix_front).
    Names are random and bound by the relay before they are recorded: nobody else can hold one while it is listed."""

    def __init__(self, prefix: str = "dynod-peer") -> None:
        self._prefix = prefix
        self._lock = threading.Lock()
        self._peers: dict[str, PeerCred] = {}

    def new_name(self) -> str:
        return f"{self._prefix}-{secrets.token_hex(12)}"

    def add(self, name: str, cred: PeerCred) -> None:
        with self._lock:
            self._peers[name] = cred

    def remove(self, name: str) -> None:
        with self._lock:
            self._peers.pop(name, None)

    def lookup(self, peer: str) -> PeerCred | None:
        """The credentials behind grpc's peer text "unix-abstract:NAME", None for any other peer."""
        if not peer.startswith(_ABSTRACT):
            return None
        with self._lock:
            return self._peers.get(peer[len(_ABSTRACT) :])

    def __len__(self) -> int:
        with self._lock:
            return len(self._peers)

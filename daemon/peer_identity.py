"""Which local user is at the other end of a gRPC call: the kernel's word, never the caller's.

grpc tells a servicer only the peer's address (`context.peer()`), never its credentials (no SO_PEERCRED,
grpc/grpc#15511). Two ways from that address to a uid:

- loopback (or any local) TCP: the connecting socket is one of this host's, and the kernel knows its owner (the
  uid that created it): asked by its exact address pair over sock_diag netlink (one socket looked up, whatever
  else is open), or, where netlink is not allowed, found in /proc/net/tcp and tcp6 (every socket listed: ~10 ms
  per lookup on a host with a thousand connections); the peer's ip:port is that socket's local end.
- dynod's Unix sockets: dyno.daemon.unix_front accepts the connection itself, reads SO_PEERCRED, and relays it to
  the gRPC server from a socket bound to a fresh abstract name, which it records in a PeerTable; grpc reports that
  name as the peer ("unix-abstract:NAME").

Anything else (a remote host, a connection gone before the lookup, another network namespace) is not identified.
"""

from __future__ import annotations

import errno
import ipaddress
import secrets
import socket
import struct
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PeerCred",
    "PeerTable",
    "TcpPeer",
    "parse_tcp_peer",
    "tcp_socket_owner",
    "diag_socket_owner",
    "proc_socket_owner",
    "NetlinkUnavailable",
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


def proc_socket_owner(peer: TcpPeer, server_port: int, proc_net: Path = PROC_NET) -> int | None:
    """The uid owning the established local socket whose local end is `peer` and whose remote end is port
    `server_port` (dynod's), read from /proc/net/tcp{,6}: the user who connected. None when there is none (a remote
    peer, a connection closed meanwhile) or more than one owner matches (never trusted)."""
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


class NetlinkUnavailable(Exception):
    """sock_diag cannot be asked here (no AF_NETLINK: a sandbox, the systemd unit's RestrictAddressFamilies)."""


_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLMSG_ERROR = 2
_NLM_F_REQUEST = 1
_NLMSG = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
_DIAG_REQ = struct.Struct("=BBBxI")  # inet_diag_req_v2 up to its sockid: family, protocol, ext, pad, states
_PORTS = struct.Struct("!HH")  # inet_diag_sockid: sport, dport (network order), then src[16], dst[16]
_TAIL = struct.Struct("=III")  # inet_diag_sockid: if, cookie[2]
_NO_COOKIE = 0xFFFFFFFF
_UID_AT = _NLMSG.size + 4 + _PORTS.size + 32 + _TAIL.size + 12  # inet_diag_msg: ... expires, rqueue, wqueue, uid
_STATE_AT = _NLMSG.size + 1


def _packed(address: ipaddress.IPv4Address | ipaddress.IPv6Address, family: int) -> bytes:
    if family == socket.AF_INET6 and isinstance(address, ipaddress.IPv4Address):
        return ipaddress.IPv6Address(f"::ffff:{address}").packed  # a dual-stack socket's view of it
    return address.packed.ljust(16, b"\0")


def diag_socket_owner(peer: TcpPeer, server: Sequence[TcpPeer], timeout_s: float = 1.0) -> int | None:
    """The uid owning the established local TCP socket connected from `peer` to one of `server`, asked of the kernel
    by that exact address pair (SOCK_DIAG_BY_FAMILY, not a dump); None when there is none. Raises
    NetlinkUnavailable when netlink cannot be used here."""
    try:
        nl = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG)
    except (OSError, AttributeError) as e:
        raise NetlinkUnavailable(str(e)) from None
    with nl:
        nl.settimeout(timeout_s)
        families = [socket.AF_INET, socket.AF_INET6] if peer.address.version == 4 else [socket.AF_INET6]
        seq = 0
        for dst in server:
            if dst.address.version != peer.address.version:
                continue
            for family in families:
                seq += 1
                req = (
                    _DIAG_REQ.pack(family, socket.IPPROTO_TCP, 0, 1 << 1)  # TCP_ESTABLISHED
                    + _PORTS.pack(peer.port, dst.port)
                    + _packed(peer.address, family)
                    + _packed(dst.address, family)
                    + _TAIL.pack(0, _NO_COOKIE, _NO_COOKIE)
                )
                try:
                    nl.send(_NLMSG.pack(_NLMSG.size + len(req), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, seq, 0) + req)
                    reply = nl.recv(65536)
                except OSError as e:
                    raise NetlinkUnavailable(str(e)) from None
                if len(reply) < _NLMSG.size:
                    continue
                kind = _NLMSG.unpack_from(reply)[1]
                if kind == _NLMSG_ERROR:
                    code = -struct.unpack_from("=i", reply, _NLMSG.size)[0]
                    if code in (errno.EPERM, errno.EACCES, errno.EOPNOTSUPP):
                        raise NetlinkUnavailable(errno.errorcode.get(code, str(code)))
                    continue  # ENOENT: no such socket
                if kind == _SOCK_DIAG_BY_FAMILY and len(reply) >= _UID_AT + 4 and reply[_STATE_AT] == 1:
                    return int(struct.unpack_from("=I", reply, _UID_AT)[0])
    return None


def tcp_socket_owner(
    peer: TcpPeer, server_port: int, proc_net: Path = PROC_NET, server_addresses: Sequence[str] = ()
) -> int | None:
    """The user who connected from `peer` to dynod's `server_port`: asked of sock_diag for the connection to the
    peer's own address (a local connection's usual source, e.g. 127.0.0.1 to 127.0.0.1) or to one of
    `server_addresses` (dynod's listen address, when it is one); where netlink is unavailable, from /proc/net/tcp
    (proc_socket_owner). None: not a local caller, or not one that can be told."""
    targets = [TcpPeer(peer.address, server_port)]
    for text in server_addresses:
        try:
            address = _plain(ipaddress.ip_address(text))
        except ValueError:
            continue
        if not address.is_unspecified and address != peer.address:
            targets.append(TcpPeer(address, server_port))
    try:
        return diag_socket_owner(peer, targets)
    except NetlinkUnavailable:
        return proc_socket_owner(peer, server_port, proc_net)


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

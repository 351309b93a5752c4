"""Which local user is behind a gRPC peer text: grpc's address formats, /proc/net/tcp{,6} read for the owner of
the connecting socket (real loopback connections, and written tables for what a host rarely shows), and the
table of relayed Unix-socket peers."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

import pytest

from dyno.daemon import peer_identity
from dyno.daemon.peer_identity import (
    NetlinkUnavailable,
    PeerCred,
    PeerTable,
    TcpPeer,
    parse_tcp_peer,
    proc_socket_owner,
    tcp_socket_owner,
)

pytestmark = pytest.mark.unit

_HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"


def test_parse_tcp_peer_reads_grpc_address_texts() -> None:
    assert parse_tcp_peer("ipv4:127.0.0.1:5555") == TcpPeer(ipaddress.ip_address("127.0.0.1"), 5555)
    assert parse_tcp_peer("ipv6:[::1]:80") == TcpPeer(ipaddress.ip_address("::1"), 80)
    # a dual-stack server's view of an IPv4 client is that IPv4 address
    assert parse_tcp_peer("ipv6:[::ffff:127.0.0.1]:7") == TcpPeer(ipaddress.ip_address("127.0.0.1"), 7)
    assert parse_tcp_peer("ipv6:[fe80::1%25eth0]:9") == TcpPeer(ipaddress.ip_address("fe80::1"), 9)
    for other in ("unix:/run/dyno/dyno.sock", "unix-abstract:x", "ipv4:bad:1", "ipv4:127.0.0.1", "", "ipv4:1.2.3.4:x"):
        assert parse_tcp_peer(other) is None, other


def _line(local: str, remote: str, state: str, uid: int) -> str:
    return f"   0: {local} {remote} {state} 00000000:00000000 00:00000000 00000000 {uid:5d}        0 1 1\n"


def test_owner_from_written_tables(tmp_path: Path) -> None:
    (tmp_path / "tcp").write_text(
        _HEADER
        + _line("0100007F:D431", "0100007F:06F2", "01", 1000)  # 127.0.0.1:54321 -> :1778, established
        + _line("0100007F:06F2", "0100007F:D431", "01", 0)  # dynod's end of it
        + _line("0100007F:D432", "0100007F:06F2", "06", 0)  # TIME_WAIT shows uid 0: never believed
    )
    (tmp_path / "tcp6").write_text(
        _HEADER + _line("00000000000000000000000001000000:D433", "00000000000000000000000001000000:06F2", "01", 1001)
    )
    v4 = ipaddress.ip_address("127.0.0.1")
    assert proc_socket_owner(TcpPeer(v4, 54321), 1778, tmp_path) == 1000
    assert proc_socket_owner(TcpPeer(v4, 54322), 1778, tmp_path) is None  # TIME_WAIT
    assert proc_socket_owner(TcpPeer(v4, 54321), 1779, tmp_path) is None  # to another port
    assert proc_socket_owner(TcpPeer(ipaddress.ip_address("::1"), 54323), 1778, tmp_path) == 1001
    assert proc_socket_owner(TcpPeer(ipaddress.ip_address("10.0.0.9"), 54321), 1778, tmp_path) is None  # remote


def test_two_owners_of_one_address_are_not_believed(tmp_path: Path) -> None:
    (tmp_path / "tcp").write_text(
        _HEADER + _line("0100007F:D431", "0100007F:06F2", "01", 1000) + _line("0100007F:D431", "0200007F:06F2", "01", 0)
    )
    assert proc_socket_owner(TcpPeer(ipaddress.ip_address("127.0.0.1"), 54321), 1778, tmp_path) is None


@pytest.mark.parametrize("family, host", [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")])
@pytest.mark.parametrize("netlink", [True, False])
def test_owner_of_a_real_loopback_connection(
    family: int, host: str, netlink: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over sock_diag, and from /proc where netlink is not allowed (the same answers)."""
    if not netlink:

        def unavailable(*args: object, **kw: object) -> None:
            raise NetlinkUnavailable("test")

        monkeypatch.setattr(peer_identity, "diag_socket_owner", unavailable)
    with socket.socket(family) as server, socket.socket(family) as client:
        try:
            server.bind((host, 0))
        except OSError:
            pytest.skip(f"no {host} here")
        server.listen()
        port = server.getsockname()[1]
        client.connect((host, port))
        conn, addr = server.accept()
        with conn:
            kind = "ipv4" if family == socket.AF_INET else "ipv6"
            peer = parse_tcp_peer(f"{kind}:[{addr[0]}]:{addr[1]}" if kind == "ipv6" else f"ipv4:{addr[0]}:{addr[1]}")
            assert peer is not None
            assert tcp_socket_owner(peer, port) == os.geteuid()
            assert tcp_socket_owner(peer, port + 1 if port < 65535 else 1) is None  # not to dynod's port
            assert tcp_socket_owner(TcpPeer(peer.address, 1), port) is None  # no such connection


def test_peer_table_answers_only_its_own_names() -> None:
    table = PeerTable()
    name = table.new_name()
    assert name != table.new_name()
    table.add(name, PeerCred(pid=7, uid=1000, gid=1000))
    assert table.lookup(f"unix-abstract:{name}") == PeerCred(7, 1000, 1000)
    assert table.lookup(f"unix:{name}") is None and table.lookup("ipv4:127.0.0.1:1") is None
    table.remove(name)
    assert table.lookup(f"unix-abstract:{name}") is None and len(table) == 0

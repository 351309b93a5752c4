"""Who calls the Dyno API, and what of the registered processes they may touch (the per-user rules).

An admin (root, dynod's own user, a member of the configured admin group, a caller with the bearer token or an mTLS
client certificate) sees and does everything. Any other local user, identified by the kernel (peer_identity), sees
the command lines of, traces, cancels and fetches only the processes running as that user. A caller that cannot be
identified (a remote host without the token or a certificate, a connection whose owner cannot be found) is no user:
it may touch nothing, unless dynod was told to trust such callers (--insecure-allow-unauthenticated-remote), which
gives them what every caller had before users were told apart.
"""

from __future__ import annotations

import os
import pwd
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from dyno.daemon.peer_identity import PROC_NET, PeerTable, parse_tcp_peer, tcp_socket_owner

__all__ = ["ADMIN", "Caller", "CallerIdentity", "user_groups"]

_GROUPS_TTL_S = 60.0  # a user added to the admin group is an admin within a minute, without a restart
_GROUPS_CACHE_MAX = 4096


@dataclass(frozen=True)
class Caller:
    """The caller of one RPC: `uid` the local user (None: not identified), `admin` whether every process is theirs
    to touch, `how` in words (for messages and logs)."""

    uid: int | None
    admin: bool
    how: str

    def may_touch(self, owner_uid: int) -> bool:
        """Whether a process (or its trace files) running as `owner_uid` (-1: unknown) is this caller's to see,
        trace, cancel or fetch."""
        return self.admin or (self.uid is not None and owner_uid >= 0 and owner_uid == self.uid)

    def who(self) -> str:
        return f"uid {self.uid}" if self.uid is not None else self.how


ADMIN = Caller(uid=None, admin=True, how="admin")


def user_groups(uid: int) -> frozenset[int]:
    """The groups of a user (primary and supplementary, from the user and group databases); empty when the uid has
    no passwd entry (a container's)."""
    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        return frozenset()
    return frozenset(os.getgrouplist(pw.pw_name, pw.pw_gid))


class _GroupsCache:
    def __init__(self, groups_of: Callable[[int], Iterable[int]]) -> None:
        self._groups_of = groups_of
        self._lock = threading.Lock()
        self._cache: dict[int, tuple[float, frozenset[int]]] = {}

    def get(self, uid: int) -> frozenset[int]:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(uid)
        if hit is not None and now - hit[0] < _GROUPS_TTL_S:
            return hit[1]
        groups = frozenset(self._groups_of(uid))  # NSS (LDAP...) may be slow: outside the lock
        with self._lock:
            if len(self._cache) >= _GROUPS_CACHE_MAX:
                self._cache.clear()
            self._cache[uid] = (now, groups)
        return groups


class CallerIdentity:
    """context -> Caller. `token_ok`: whether a call's metadata carries dynod's bearer token (None: no token is
    configured). `server_port`: the TCP port dynod serves the API on (set once bound; 0: TCP callers are not looked
    up), `server_addresses` its listen address. `trust_unidentified`: give callers that cannot be identified admin
    rights (the insecure flag)."""

    def __init__(
        self,
        *,
        peers: PeerTable,
        token_ok: Callable[[Any], bool] | None = None,
        admin_gid: int | None = None,
        daemon_uid: int | None = None,
        trust_unidentified: bool = False,
        proc_net: Path = PROC_NET,
        groups_of: Callable[[int], Iterable[int]] = user_groups,
    ) -> None:
        self.peers = peers
        self.token_ok = token_ok
        self._admin_gid = admin_gid
        self._daemon_uid = os.geteuid() if daemon_uid is None else daemon_uid
        self._trust_unidentified = trust_unidentified
        self._proc_net = proc_net
        self._groups = _GroupsCache(groups_of)
        self.server_port = 0
        self.server_addresses: tuple[str, ...] = ()  # dynod's listen address(es), for the TCP lookup

    def caller(self, context: grpc.ServicerContext) -> Caller:
        if self.token_ok is not None and self.token_ok(context.invocation_metadata()):
            return Caller(None, True, "bearer token")
        if context.peer_identities():  # only a verified client certificate (mTLS) gives one
            return Caller(None, True, "client certificate")
        peer = context.peer()
        uid = self.uid_of(peer)
        if uid is None:
            return Caller(None, self._trust_unidentified, "an unidentified caller")
        return self.local(uid)

    def local(self, uid: int, gid: int | None = None) -> Caller:
        """The Caller of a local user."""
        if uid in (0, self._daemon_uid):
            return Caller(uid, True, f"uid {uid}")
        if self._admin_gid is not None and (gid == self._admin_gid or self._admin_gid in self._groups.get(uid)):
            return Caller(uid, True, f"uid {uid} (admin group)")
        return Caller(uid, False, f"uid {uid}")

    def uid_of(self, peer: str) -> int | None:
        """The local user behind grpc's peer text: a relayed Unix-socket connection's, or a local TCP socket's owner."""
        cred = self.peers.lookup(peer)
        if cred is not None:
            return cred.uid
        tcp = parse_tcp_peer(peer)
        if tcp is None or not self.server_port:
            return None
        return tcp_socket_owner(tcp, self.server_port, self._proc_net, self.server_addresses)

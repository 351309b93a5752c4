"""Who a caller is to dynod's per-user rules: root, dynod's own user, the admin group, the token and a client
certificate make an admin; any other identified local user touches only their own processes; an unidentified
caller touches nothing unless dynod was told to trust it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from dyno.daemon.callers import ADMIN, Caller, CallerIdentity
from dyno.daemon.peer_identity import PeerCred, PeerTable

pytestmark = pytest.mark.unit

ADMINS_GID = 4242


class Ctx:
    def __init__(self, peer: str, metadata: Sequence[tuple[str, str]] = (), identities: Any = None) -> None:
        self._peer, self._metadata, self._identities = peer, tuple(metadata), identities

    def peer(self) -> str:
        return self._peer

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def peer_identities(self) -> Any:
        return self._identities


def _identity(**kw: Any) -> tuple[CallerIdentity, PeerTable]:
    peers = PeerTable()
    kw.setdefault("daemon_uid", 0)
    kw.setdefault("groups_of", lambda uid: {ADMINS_GID} if uid == 1002 else {uid})
    return CallerIdentity(peers=peers, admin_gid=ADMINS_GID, **kw), peers


def _relayed(peers: PeerTable, uid: int) -> Ctx:
    name = peers.new_name()
    peers.add(name, PeerCred(pid=1, uid=uid, gid=uid))
    return Ctx(f"unix-abstract:{name}")


def test_local_users_by_uid() -> None:
    identity, peers = _identity()
    assert identity.caller(_relayed(peers, 0)).admin  # root
    user = identity.caller(_relayed(peers, 1001))
    assert user == Caller(1001, False, "uid 1001")
    assert user.may_touch(1001) and not user.may_touch(0) and not user.may_touch(-1)  # -1: an unknown owner
    assert identity.caller(_relayed(peers, 1002)).admin  # in the admin group


def test_dynods_own_user_is_its_admin() -> None:
    identity, peers = _identity(daemon_uid=1000)
    assert identity.caller(_relayed(peers, 1000)).admin
    assert not identity.caller(_relayed(peers, 1001)).admin


def test_token_and_certificate_make_an_admin_wherever_they_come_from() -> None:
    identity, _ = _identity(token_ok=lambda md: ("authorization", "Bearer t") in md)
    remote = "ipv4:10.1.2.3:4444"
    assert identity.caller(Ctx(remote, [("authorization", "Bearer t")])).admin
    assert identity.caller(Ctx(remote, identities=[b"client-cn"])).admin
    nobody = identity.caller(Ctx(remote, [("authorization", "Bearer wrong")]))
    assert nobody.uid is None and not nobody.admin and not nobody.may_touch(0)


def test_unidentified_callers_touch_nothing_unless_trusted() -> None:
    identity, _ = _identity()
    identity.server_port = 1778
    assert not identity.caller(Ctx("ipv4:10.1.2.3:4444")).admin
    assert not identity.caller(Ctx("unix-abstract:dynod-peer-unknown")).admin  # not in the table
    trusting, _ = _identity(trust_unidentified=True)
    assert trusting.caller(Ctx("ipv4:10.1.2.3:4444")).admin


def test_the_default_of_plain_objects_is_admin() -> None:
    assert ADMIN.admin and ADMIN.may_touch(12345)

"""ListProcesses' answer for the whole registry, kept between calls and patched where records changed.

**Why:** 50 callers polling ListProcesses back to back over 1,000 registered processes kept dynod's one GIL
saturated: each answer sorted the records, worked out every process's role and walked every record in Python (~1.3
ms), while between two calls only a few records change (a libkineto poll or an agent keepalive renews
`last_seen_ms`, ~200 times a second). A record is a frozen object replaced when it changes, so the records that
changed since the last answer are the ones that are no longer the same objects at their place in the registry's
order (ProcessRegistry.listing): only their fields are encoded again, and the answer is joined anew.

Exact, never stale: an answer is reused only for the very same records, in the same order, with the same roles
(the roles as TraceManager.roles works them out: DataLoader workers as recently read, RolesCache), and for the
same visibility (an admin's, or one local user's: another user's command lines are hidden).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from itertools import compress, count

from dyno.daemon import proto_convert as pc
from dyno.daemon.callers import Caller
from dyno.daemon.encoded_answers import MAX_CACHED_BYTES
from dyno.daemon.registered_process import RegisteredProcess
from dyno.daemon.tracing.listed_workers import LISTED_WORKERS_MAX_AGE_MS
from dyno.pbwire import len_field
from dyno.v1 import dyno_pb2

__all__ = ["OTHERS_CMDLINE", "ProcessFields", "RolesCache", "WholeListing", "processes_field"]

# What a local user who is no admin sees of another user's process's command line (arguments can carry secrets)
OTHERS_CMDLINE = "(hidden: another user's process)"
_MAX_VISIBILITIES = 16  # listings kept at once: admins' and a few local users'


def processes_field(msg: dyno_pb2.ProcessInfo) -> bytes:
    return len_field(0x0A, msg.SerializeToString())  # ListProcessesResponse.processes = 1


def with_cmdline(msg: dyno_pb2.ProcessInfo, cmdline: str) -> bytes:
    """`msg` (a cached message, never changed) with another command line, as a processes field."""
    out = dyno_pb2.ProcessInfo()
    out.CopyFrom(msg)
    out.cmdline = cmdline
    return processes_field(out)


class ProcessFields:
    """Each registered process's ProcessInfo message and its encoding as a ListProcessesResponse.processes field,
    built again only when its record changed (records are frozen: a change is a new object) or its role did.
    **Why:** building ~1,000 messages field by field took ~50 ms of the GIL per ListProcesses."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[RegisteredProcess, str, dyno_pb2.ProcessInfo, bytes]] = {}

    def info(self, p: RegisteredProcess, role: str) -> tuple[dyno_pb2.ProcessInfo, bytes]:
        """The message (never changed after: callers copy it) and its encoded field (tag and length included)."""
        hit = self._entries.get(p.pid)
        if hit is not None and hit[0] is p and hit[1] == role:
            return hit[2], hit[3]
        msg = pc.process_to_pb(p, role)
        field = processes_field(msg)
        self._entries[p.pid] = (p, role, msg, field)
        return msg, field

    def visible(self, p: RegisteredProcess, role: str, caller: Caller) -> bytes:
        """The field as `caller` sees it: another user's command line hidden from a non-admin."""
        msg, field = self.info(p, role)
        if p.cmdline and not caller.may_touch(p.uid):  # the record's fields: faster to read than the message's
            return with_cmdline(msg, OTHERS_CMDLINE)
        return field

    def keep_only(self, procs: list[RegisteredProcess]) -> None:
        """Forget the pids that are not in `procs` (all registered processes) once they are most of the cache."""
        if len(self._entries) > 2 * len(procs) + 64:
            live = {p.pid for p in procs}
            self._entries = {pid: e for pid, e in list(self._entries.items()) if pid in live}


class RolesCache:
    """TraceManager.roles of the whole registry, worked out again when the registry's roles version changed
    (ProcessRegistry.listing) or LISTED_WORKERS_MAX_AGE_MS passed: a process becomes a DataLoader worker without
    its record changing. listed_workers keeps its own answers as long, so a new worker may be listed as a trainer
    for up to twice that in ListProcesses (trace requests ask listed_workers itself)."""

    def __init__(self, roles_of: Callable[[list[RegisteredProcess]], dict[int, str]], clock_ms: Callable[[], int]):
        self._roles_of = roles_of
        self._clock_ms = clock_ms
        self._kept: tuple[int, int, dict[int, str]] | None = None  # (roles version, at ms, roles)

    def roles(self, roles_version: int, procs: list[RegisteredProcess]) -> dict[int, str]:
        """The roles of `procs`, all the registered processes at `roles_version` (never changed: callers read it)."""
        now = self._clock_ms()
        kept = self._kept
        if kept is not None and kept[0] == roles_version and 0 <= now - kept[1] < LISTED_WORKERS_MAX_AGE_MS:
            return kept[2]
        roles = self._roles_of(procs)
        if kept is not None and roles == kept[2]:
            roles = kept[2]  # the same object: the listings built with it stay valid (WholeListing)
        self._kept = (roles_version, now, roles)
        return roles


class WholeListing:
    """The encoded processes of the whole registry, for each visibility, with the records, roles and fields they
    were built of: at most _MAX_VISIBILITIES of them and `max_bytes` of joined answers together (each up to
    MAX_PROCESS_LIST_BYTES; the same budget as EncodedAnswers', dynod's memory being budgeted), the least recently
    built going first; the newest is always kept. Not thread-safe: the caller holds a lock around `fields`."""

    def __init__(self, fields: ProcessFields, max_bytes: int = MAX_CACHED_BYTES) -> None:
        self._fields = fields
        self._max_bytes = max_bytes
        # visibility (None: admin, else the uid; -1: nobody's) -> (records, roles, fields, encoded processes),
        # the least recently built first
        self._kept: dict[int | None, tuple[list[RegisteredProcess], dict[int, str], list[bytes], bytes]] = {}
        self._bytes = 0  # the joined answers kept (their fields are mostly ProcessFields' own)

    @property
    def kept_bytes(self) -> int:
        return self._bytes

    def processes(self, procs: list[RegisteredProcess], roles: dict[int, str], caller: Caller) -> bytes:
        """The ListProcessesResponse.processes fields of `procs` (every registered process, in the registry's
        order) as `caller` sees them, joined: the fields of the records that are not the same objects as last time
        built again, the others reused."""
        visibility = None if caller.admin else (caller.uid if caller.uid is not None else -1)
        kept = self._kept.get(visibility)
        if kept is not None and kept[1] is roles and len(kept[0]) == len(procs):
            old, _, fields, joined = kept
            changed = list(compress(count(), map(operator.is_not, procs, old)))
            if not changed:
                return joined
            if all(procs[i].pid == old[i].pid for i in changed):
                for i in changed:  # patched in place: only the kept entry holds this list
                    p = procs[i]
                    fields[i] = self._fields.visible(p, roles.get(p.pid, ""), caller)
                return self._keep(visibility, procs, roles, fields)
        visible = self._fields.visible
        return self._keep(visibility, procs, roles, [visible(p, roles.get(p.pid, ""), caller) for p in procs])

    def _keep(
        self,
        visibility: int | None,
        procs: list[RegisteredProcess],
        roles: dict[int, str],
        fields: list[bytes],
    ) -> bytes:
        old = self._kept.pop(visibility, None)
        if old is not None:
            self._bytes -= len(old[3])
        joined = b"".join(fields)
        while self._kept and (len(self._kept) >= _MAX_VISIBILITIES or self._bytes + len(joined) > self._max_bytes):
            evicted = self._kept.pop(next(iter(self._kept)))
            self._bytes -= len(evicted[3])
        self._kept[visibility] = (procs, roles, fields, joined)
        self._bytes += len(joined)
        return joined

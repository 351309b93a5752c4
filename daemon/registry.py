"""Registry of the trainer processes that registered with this daemon (agent or libkineto protocol).

Plain, thread-safe, clock and liveness injectable. Dead pids and clients silent past a timeout are dropped by
`collect_garbage()`; listeners hear about every removal so a running trace can be failed with the reason.

Bounded: any local user can register (the agent socket is 0666, the kineto endpoint an abstract socket), so at most
`max_processes` entries are kept, and at most `max_per_uid` of one user's processes, which leaves room for other
users' trainers when one user's buggy launcher floods it. A new pid past a cap raises RegistryFullError, after dead
pids and silent clients were dropped (at most once per PRUNE_EVERY_MS, so a flood of refused calls cannot make each
one walk the whole table). The uid of a kineto process is the kernel's (SCM_CREDENTIALS); of an agent process, the
owner of /proc/<pid>: grpc tells a servicer nothing about the peer of a Unix socket (no SO_PEERCRED, grpc/grpc#15511),
so it is the claimed process's uid, not necessarily the caller's.
"""

from __future__ import annotations

import builtins
import collections
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from dyno.daemon.job_users import JobOfAnotherUserError, JobUsers
from dyno.daemon.registered_process import PROTOCOL_KINETO, PROTOCOLS, RegisteredProcess

__all__ = [
    "ProcessRegistry",
    "RegistryFullError",
    "MAX_PROCESSES",
    "MAX_PROCESSES_PER_UID",
    "pid_alive",
    "pid_uid",
    "now_ms",
]

log = logging.getLogger(__name__)

MAX_ANCESTRY = 32
# The default caps (dynod's max_processes and max_processes_per_uid, config.py). A host runs a few dozen trainers
# (8 GPUs x (trainer + DataLoader workers) + launchers); an entry is ~5 KB at most (its command line is capped at
# 4 KB), so the whole table stays under ~20 MB.
MAX_PROCESSES = 4096
MAX_PROCESSES_PER_UID = 1024
PRUNE_EVERY_MS = 1000


def now_ms() -> int:
    return int(time.time() * 1000)


def pid_alive(pid: int) -> bool:
    """True if a process with this pid exists (permission errors mean it exists, owned by someone else)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); it will never poll again.
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[-1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def pid_uid(pid: int) -> int:
    """The uid owning /proc/<pid> (the process's effective uid; root for a non-dumpable one), -1 when unknown."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except (OSError, ValueError):
        return -1


class RegistryFullError(Exception):
    """A new process past the registry's total or per-uid cap; the message says which (RESOURCE_EXHAUSTED)."""


RemovalListener = Callable[[RegisteredProcess, str], None]


def _list_order(p: RegisteredProcess) -> tuple[str, int]:
    return p.job_id, p.pid


def _role_inputs(p: RegisteredProcess) -> tuple[object, ...]:
    """What the roles (dyno.daemon.process_roles) and DataLoader worker checks read of a record."""
    return p.job_id, p.ancestry, p.launcher, p.protocol, p.start_time


class ProcessRegistry:
    """pid -> RegisteredProcess. Every method is safe to call from any thread."""

    def __init__(
        self,
        *,
        silent_timeout_s: float = 30.0,
        is_alive: Callable[[int], bool] = pid_alive,
        uid_of: Callable[[int], int] = pid_uid,
        clock_ms: Callable[[], int] = now_ms,
        max_processes: int = MAX_PROCESSES,
        max_per_uid: int = MAX_PROCESSES_PER_UID,
        job_admin: Callable[[int], bool] | None = None,
    ) -> None:
        """`job_admin(uid)`: whether a process of that user may join a job of other users' (dyno.daemon.job_users);
        None: every process may join any job."""
        self._silent_timeout_ms = int(silent_timeout_s * 1000)
        self._is_alive = is_alive
        self._uid_of = uid_of
        self._clock_ms = clock_ms
        self.max_processes = max_processes
        self.max_per_uid = max_per_uid
        self._lock = threading.Lock()
        self._procs: dict[int, RegisteredProcess] = {}
        self._per_uid: collections.Counter[int] = collections.Counter()
        self._job_admin = job_admin
        self._job_users = JobUsers()
        self._last_prune_ms: int | None = None
        self._listeners: list[RemovalListener] = []
        # list()'s order (job id, pid), kept across refreshes of a record in place; None: sort again. **Why:**
        # sorting 1,000 records took ~0.3 ms of the GIL for every ListProcesses, and records are replaced ~200
        # times a second (polls, keepalives) but seldom added, removed or moved to another job.
        self._sorted: builtins.list[RegisteredProcess] | None = None
        self._sorted_at: dict[int, int] = {}  # pid -> its index in _sorted
        self._roles_version = 0

    def add_removal_listener(self, listener: RemovalListener) -> None:
        self._listeners.append(listener)

    def is_alive(self, pid: int) -> bool:
        """Whether the pid names a live process (the liveness check the registry was built with)."""
        return self._is_alive(pid)

    def register(self, proc: RegisteredProcess) -> RegisteredProcess:
        """Insert or refresh a process; keeps registered_ms and busy state of an existing entry of the same pid. A
        connected agent's entry is not replaced by libkineto polls from the same process (returned as is). An entry
        of another process that had the pid (its start time differs) is removed first: the listeners hear it
        exited. Raises RegistryFullError for a new process past a cap (see the module's doc), JobOfAnotherUserError
        for one joining a job of other users' (dyno.daemon.job_users)."""
        if proc.protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {proc.protocol!r}")
        if proc.uid < 0:
            proc = replace(proc, uid=self._uid_of(proc.pid))  # a /proc read, outside the lock
        joins_any = self._joins_any_job(proc)
        refusal = self._admission(proc)
        if refusal is not None and self._prune():
            refusal = self._admission(proc)
        if refusal is not None:
            raise RegistryFullError(refusal)
        now = self._clock_ms()
        ancestry = tuple(p for p in proc.ancestry if p > 1)[:MAX_ANCESTRY]
        with self._lock:
            old = self._procs.get(proc.pid)
            if old is not None and old.connected and proc.protocol == PROTOCOL_KINETO:
                # A trainer with both the dyno agent and KINETO_USE_DAEMON=1 (set fleet-wide for dynolog): the
                # agent (richer options, asked for by dyno-run) stays, else libkineto's polls (every 5 s) would orphan
                # its Watch stream. The polls still keep it seen.
                self._put(old := replace(old, last_seen_ms=now))
                return old
            # A pid reused before garbage collection noticed the exit (~0.5 s): the old process is gone.
            reused = old is not None and not old.same_process(proc.start_time)
            keep = not reused and old is not None and old.protocol == proc.protocol and old.job_id == proc.job_id
            rec = replace(
                proc,
                ancestry=ancestry,
                registered_ms=old.registered_ms if keep and old else now,
                last_seen_ms=now,
                busy=old.busy if keep and old else False,
                current_trace_id=old.current_trace_id if keep and old else "",
            )
            # Checked again under the lock: concurrent registrations may have taken the last places meanwhile
            refusal = self._refusal(rec)
            if refusal is not None:
                raise RegistryFullError(refusal)
            conflict = None if joins_any else self._job_users.conflict(rec.job_ids, rec.uid)
            if conflict is not None:
                raise JobOfAnotherUserError(rec.pid, rec.uid, conflict)
            self._put(rec)
        if reused and old is not None:
            self._notify([(old, "process exited (its pid was reused)")])
        if old is None or reused:
            also = f" (also {', '.join(map(repr, rec.job_aliases))})" if rec.job_aliases else ""
            log.info("registered %s process pid=%d job=%r%s", rec.protocol, rec.pid, rec.job_id, also)
        return rec

    def touch(self, pid: int) -> bool:
        with self._lock:
            rec = self._procs.get(pid)
            if rec is None:
                return False
            self._put(replace(rec, last_seen_ms=self._clock_ms()))
            return True

    def set_connected(self, pid: int, session_id: str, connected: bool) -> bool:
        """Mark the agent's Watch stream open/closed; ignored when the pid re-registered with another session."""
        with self._lock:
            rec = self._procs.get(pid)
            if rec is None or rec.session_id != session_id:
                return False
            self._put(replace(rec, connected=connected, last_seen_ms=self._clock_ms()))
            return True

    def set_busy(self, pid: int, trace_id: str) -> None:
        """trace_id "" clears the busy flag."""
        with self._lock:
            rec = self._procs.get(pid)
            if rec is not None:
                self._put(replace(rec, busy=bool(trace_id), current_trace_id=trace_id))

    def get(self, pid: int) -> RegisteredProcess | None:
        with self._lock:
            return self._procs.get(pid)

    def list(self, job_id: str = "") -> list[RegisteredProcess]:
        """The registered processes (of `job_id`, when given: by its own id or an alias), by job id, then pid."""
        return self.listing(job_id)[1]

    def listing(self, job_id: str = "") -> tuple[int, builtins.list[RegisteredProcess]]:
        """list() with the registry's roles version when it was taken: it changes with what dyno.daemon.process_roles
        reads of a record, or a process added or removed (not with a refresh: a poll, busy, connected)."""
        with self._lock:
            if self._sorted is None:
                self._sorted = sorted(self._procs.values(), key=_list_order)
                self._sorted_at = {p.pid: i for i, p in enumerate(self._sorted)}
            procs = list(self._sorted)
            roles_version = self._roles_version
        return roles_version, [p for p in procs if p.answers_to(job_id)] if job_id else procs

    def jobs(self) -> builtins.list[str]:
        """The registered job ids (aliases left out: they name the same processes)."""
        with self._lock:
            return sorted({p.job_id for p in self._procs.values()})

    def __len__(self) -> int:
        with self._lock:
            return len(self._procs)

    def remove(self, pid: int, reason: str, *, session_id: str | None = None) -> RegisteredProcess | None:
        """Drop a process (only if still of that session, when given) and tell the listeners why."""
        with self._lock:
            rec = self._procs.get(pid)
            if rec is None or (session_id is not None and rec.session_id != session_id):
                return None
            self._drop(pid)
        self._notify([(rec, reason)])
        return rec

    def collect_garbage(self) -> builtins.list[tuple[RegisteredProcess, str]]:
        """Drop dead pids and clients silent past the timeout (an agent with an open stream is never silent)."""
        now = self._clock_ms()
        with self._lock:
            candidates = list(self._procs.values())
        dropped: builtins.list[tuple[RegisteredProcess, str]] = []
        for rec in candidates:
            if not self._is_alive(rec.pid):
                reason = "process exited"
            elif not rec.connected and now - rec.last_seen_ms > self._silent_timeout_ms:
                what = "stopped polling" if rec.protocol == PROTOCOL_KINETO else "disconnected"
                reason = f"process {what} ({(now - rec.last_seen_ms) / 1000:.0f} s silent)"
            else:
                continue
            with self._lock:
                # Re-check under the lock: it may have polled or re-registered meanwhile.
                cur = self._procs.get(rec.pid)
                if cur is None or cur.last_seen_ms != rec.last_seen_ms or cur.session_id != rec.session_id:
                    continue
                self._drop(rec.pid)
            dropped.append((rec, reason))
        self._notify(dropped)
        return dropped

    def uid_counts(self) -> dict[int, int]:
        """Registered processes per uid (-1: unknown)."""
        with self._lock:
            return {uid: n for uid, n in self._per_uid.items() if n}

    # -- caps and jobs ----------------------------------------------------------------------------------------

    def _joins_any_job(self, proc: RegisteredProcess) -> bool:
        """Whether `proc` may be registered without the job check: no check configured, or it would refuse and the
        process's user is an admin (asked outside the lock: the admin group is looked up in the user database)."""
        if self._job_admin is None:
            return True
        with self._lock:
            conflict = self._job_users.conflict(proc.job_ids, proc.uid)
        return conflict is not None and self._job_admin(proc.uid)

    def _put(self, rec: RegisteredProcess) -> None:
        """Under self._lock: insert or replace the pid's entry, keeping the per-uid and per-job counts, list()'s
        order and the roles version."""
        old = self._procs.get(rec.pid)
        self._procs[rec.pid] = rec
        if old is None or _role_inputs(old) != _role_inputs(rec):
            self._roles_version += 1
        if self._sorted is not None:
            if old is not None and old.job_id == rec.job_id:
                self._sorted[self._sorted_at[rec.pid]] = rec
            else:
                self._sorted = None
        if old is not None and old.uid == rec.uid and old.job_ids == rec.job_ids:
            return  # a refresh (a poll, busy, connected: most calls): the counts stand
        if old is not None:
            self._per_uid[old.uid] -= 1
            self._job_users.remove(old.job_ids, old.uid)
        self._per_uid[rec.uid] += 1
        self._job_users.add(rec.job_ids, rec.uid)

    def _drop(self, pid: int) -> None:
        """Under self._lock: remove the pid's entry, keeping the per-uid and per-job counts."""
        rec = self._procs.pop(pid)
        self._roles_version += 1
        self._sorted = None
        self._job_users.remove(rec.job_ids, rec.uid)
        self._per_uid[rec.uid] -= 1
        if self._per_uid[rec.uid] <= 0:
            del self._per_uid[rec.uid]

    def _refusal(self, rec: RegisteredProcess) -> str | None:
        """Under self._lock: why `rec` may not be added (None: it may). Refreshing an entry of the pid is always
        allowed; it counts against a cap only as a new process or as one of another uid."""
        old = self._procs.get(rec.pid)
        if old is None and len(self._procs) >= self.max_processes:
            return (
                f"{len(self._procs)} processes are registered with this daemon, its limit "
                f"({self.max_processes}, dynod's max_processes); pid {rec.pid} is not registered"
            )
        same_uid = old is not None and old.uid == rec.uid
        if not same_uid and self._per_uid[rec.uid] >= self.max_per_uid:
            who = f"uid {rec.uid}" if rec.uid >= 0 else "an unknown uid"
            return (
                f"{self._per_uid[rec.uid]} processes of {who} are registered with this daemon, the limit per "
                f"user ({self.max_per_uid}, dynod's max_processes_per_uid); pid {rec.pid} is not registered"
            )
        return None

    def _admission(self, rec: RegisteredProcess) -> str | None:
        with self._lock:
            return self._refusal(rec)

    def _prune(self) -> bool:
        """Drop dead pids and silent clients before refusing a registration; False (nothing done) when the last
        prune was less than PRUNE_EVERY_MS ago."""
        now = self._clock_ms()
        with self._lock:
            if self._last_prune_ms is not None and now - self._last_prune_ms < PRUNE_EVERY_MS:
                return False
            self._last_prune_ms = now
        return bool(self.collect_garbage())

    def _notify(self, removed: Iterable[tuple[RegisteredProcess, str]]) -> None:
        for rec, reason in removed:
            log.info("dropped %s process pid=%d job=%r: %s", rec.protocol, rec.pid, rec.job_id, reason)
            for listener in self._listeners:
                try:
                    listener(rec, reason)
                except Exception:  # a listener bug must not break garbage collection
                    log.exception("registry removal listener failed")

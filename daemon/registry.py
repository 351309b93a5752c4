"""Registry of the trainer processes that registered with this daemon (agent or libkineto protocol).

Plain, thread-safe, clock and liveness injectable. Dead pids and clients silent past a timeout are dropped by
`collect_garbage()`; listeners hear about every removal so a running trace can be failed with the reason.
"""

from __future__ import annotations

import builtins
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

__all__ = [
    "PROTOCOL_AGENT",
    "PROTOCOL_KINETO",
    "ProcessRecord",
    "ProcessRegistry",
    "pid_alive",
    "now_ms",
]

log = logging.getLogger(__name__)

PROTOCOL_AGENT = "agent"
PROTOCOL_KINETO = "kineto"
_PROTOCOLS = (PROTOCOL_AGENT, PROTOCOL_KINETO)
MAX_ANCESTRY = 32


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


@dataclass(frozen=True)
class ProcessRecord:
    pid: int
    job_id: str
    protocol: str  # PROTOCOL_AGENT | PROTOCOL_KINETO
    ancestry: tuple[int, ...] = ()  # parent first
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    gpu: int = -1
    registered_ms: int = 0
    last_seen_ms: int = 0
    busy: bool = False
    current_trace_id: str = ""
    cmdline: str = ""
    hostname: str = ""
    session_id: str = ""  # agent: the Register session; "" for kineto
    connected: bool = False  # agent: a Watch stream is open (liveness comes from the stream, not polls)
    uid: int = -1  # kineto: kernel-reported uid of the sender
    # Other job ids it answers to: kineto's decimal integer when its environment named another (kineto_identity.py)
    job_aliases: tuple[str, ...] = ()
    # kineto: the process's start time (/proc/<pid>/stat), which tells it from a later process reusing its pid; 0:
    # unknown
    start_time: int = 0

    def same_process(self, start_time: int) -> bool:
        """False when both start times are known and differ: the pid now belongs to another process."""
        return not (self.start_time and start_time and self.start_time != start_time)

    def answers_to(self, job_id: str) -> bool:
        """Whether a request for this job id matches it: its own id or an alias."""
        return job_id == self.job_id or job_id in self.job_aliases


RemovalListener = Callable[[ProcessRecord, str], None]


class ProcessRegistry:
    """pid -> ProcessRecord. Every method is safe to call from any thread."""

    def __init__(
        self,
        *,
        silent_timeout_s: float = 30.0,
        is_alive: Callable[[int], bool] = pid_alive,
        clock_ms: Callable[[], int] = now_ms,
    ) -> None:
        self._silent_timeout_ms = int(silent_timeout_s * 1000)
        self._is_alive = is_alive
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._procs: dict[int, ProcessRecord] = {}
        self._listeners: list[RemovalListener] = []

    def add_removal_listener(self, listener: RemovalListener) -> None:
        self._listeners.append(listener)

    def register(self, record: ProcessRecord) -> ProcessRecord:
        """Insert or refresh a process; keeps registered_ms and busy state of an existing entry of the same pid. A
        connected agent's entry is not replaced by libkineto polls from the same process (returned as is). An entry
        of another process that had the pid (its start time differs) is removed first: the listeners hear it
        exited."""
        if record.protocol not in _PROTOCOLS:
            raise ValueError(f"unknown protocol {record.protocol!r}")
        now = self._clock_ms()
        ancestry = tuple(p for p in record.ancestry if p > 1)[:MAX_ANCESTRY]
        with self._lock:
            old = self._procs.get(record.pid)
            if old is not None and old.connected and record.protocol == PROTOCOL_KINETO:
                # A trainer with both the dyno agent and KINETO_USE_DAEMON=1 (set fleet-wide for dynolog): the
                # agent (richer options, asked for by dyno-run) stays; libkineto's polls replaced it every 5 s,
                # orphaning its Watch stream. The polls still keep it seen.
                self._procs[record.pid] = old = replace(old, last_seen_ms=now)
                return old
            # A pid reused before garbage collection noticed the exit (~0.5 s): the old process is gone.
            reused = old is not None and not old.same_process(record.start_time)
            keep = not reused and old is not None and old.protocol == record.protocol and old.job_id == record.job_id
            rec = replace(
                record,
                ancestry=ancestry,
                registered_ms=old.registered_ms if keep and old else now,
                last_seen_ms=now,
                busy=old.busy if keep and old else False,
                current_trace_id=old.current_trace_id if keep and old else "",
            )
            self._procs[record.pid] = rec
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
            self._procs[pid] = replace(rec, last_seen_ms=self._clock_ms())
            return True

    def set_connected(self, pid: int, session_id: str, connected: bool) -> bool:
        """Mark the agent's Watch stream open/closed; ignored when the pid re-registered with another session."""
        with self._lock:
            rec = self._procs.get(pid)
            if rec is None or rec.session_id != session_id:
                return False
            self._procs[pid] = replace(rec, connected=connected, last_seen_ms=self._clock_ms())
            return True

    def set_busy(self, pid: int, trace_id: str) -> None:
        """trace_id "" clears the busy flag."""
        with self._lock:
            rec = self._procs.get(pid)
            if rec is not None:
                self._procs[pid] = replace(rec, busy=bool(trace_id), current_trace_id=trace_id)

    def get(self, pid: int) -> ProcessRecord | None:
        with self._lock:
            return self._procs.get(pid)

    def list(self, job_id: str = "") -> list[ProcessRecord]:
        with self._lock:
            procs = list(self._procs.values())
        return sorted((p for p in procs if not job_id or p.answers_to(job_id)), key=lambda p: (p.job_id, p.pid))

    def jobs(self) -> builtins.list[str]:
        """The registered job ids (aliases left out: they name the same processes)."""
        with self._lock:
            return sorted({p.job_id for p in self._procs.values()})

    def __len__(self) -> int:
        with self._lock:
            return len(self._procs)

    def remove(self, pid: int, reason: str, *, session_id: str | None = None) -> ProcessRecord | None:
        """Drop a process (only if still of that session, when given) and tell the listeners why."""
        with self._lock:
            rec = self._procs.get(pid)
            if rec is None or (session_id is not None and rec.session_id != session_id):
                return None
            del self._procs[pid]
        self._notify([(rec, reason)])
        return rec

    def collect_garbage(self) -> builtins.list[tuple[ProcessRecord, str]]:
        """Drop dead pids and clients silent past the timeout (an agent with an open stream is never silent)."""
        now = self._clock_ms()
        with self._lock:
            candidates = list(self._procs.values())
        dropped: builtins.list[tuple[ProcessRecord, str]] = []
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
                del self._procs[rec.pid]
            dropped.append((rec, reason))
        self._notify(dropped)
        return dropped

    def _notify(self, removed: Iterable[tuple[ProcessRecord, str]]) -> None:
        for rec, reason in removed:
            log.info("dropped %s process pid=%d job=%r: %s", rec.protocol, rec.pid, rec.job_id, reason)
            for listener in self._listeners:
                try:
                    listener(rec, reason)
                except Exception:  # a listener bug must not break garbage collection
                    log.exception("registry removal listener failed")

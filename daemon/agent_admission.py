"""Who may register with the agent service and report to it: the checks on a Register request (pid namespace,
liveness, a process not a thread, the caller's ownership, no taking over a live registration), the bound on
registrations waiting for their Watch stream, and the session a report must carry. Plain Python: the servicer
(agent_service.py) turns a Refusal into its gRPC status.
"""

from __future__ import annotations

import enum
import os
import secrets
import threading
import time
from collections.abc import Callable

from dyno.daemon.registered_process import PROTOCOL_AGENT
from dyno.daemon.registry import ProcessRegistry, pid_uid
from dyno.request_limits import JOB_ID_RULE, job_id_ok

__all__ = [
    "MAX_ANCESTRY",
    "MAX_TEXT",
    "MAX_UNWATCHED",
    "UNWATCHED_GRACE_S",
    "Admission",
    "Refusal",
    "RefusalKind",
    "not_a_process",
    "own_pid_namespace",
]

MAX_TEXT = 4096
MAX_ANCESTRY = 64
# Registrations waiting for their Watch stream, at most (see Admission.admit). An agent opens its stream
# milliseconds after Register; one that has not within the grace period makes room for a new one.
MAX_UNWATCHED = 256
UNWATCHED_GRACE_S = 10.0
_PF_KTHREAD = 0x00200000  # /proc/<pid>/stat flags: a kernel thread


class RefusalKind(enum.Enum):
    """Why a request is refused, as the servicer maps it to a status code."""

    INVALID = "invalid"  # the request itself is wrong (INVALID_ARGUMENT)
    PRECONDITION = "precondition"  # not now, or not from there (FAILED_PRECONDITION)
    NOT_PERMITTED = "not_permitted"  # not by this caller (PERMISSION_DENIED)
    FULL = "full"  # a limit of this daemon (RESOURCE_EXHAUSTED)


class RefusalReason(enum.Enum):
    """Which check refused a request; its value is the dyno.error_reasons.ErrorReason the status carries."""

    BAD_REQUEST = "INVALID_REQUEST"
    OTHER_PID_NAMESPACE = "OTHER_PID_NAMESPACE"
    NO_SUCH_PROCESS = "NO_SUCH_PROCESS"
    NOT_OWNER = "NOT_YOUR_PROCESS"
    ALREADY_REGISTERED = "ALREADY_REGISTERED"
    TOO_MANY_UNWATCHED = "TOO_MANY_UNWATCHED"
    NOT_REGISTERED = "NOT_REGISTERED"
    WRONG_SESSION = "WRONG_SESSION"


class Refusal(Exception):
    def __init__(self, kind: RefusalKind, reason: RefusalReason, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.reason = reason
        self.message = message


def own_pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def not_a_process(pid: int) -> str | None:
    """Why `pid` names nothing that could run an agent, or None (also when /proc cannot tell: it exited, which the
    liveness check reports). A thread's id answers kill(2) and has its /proc entry like a process's, so a thread's
    id would be a pid anyone could register (enough, on a busy host, to fill the registry's caps); a kernel thread
    runs no Python."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            tgid = next((int(line.split()[1]) for line in f if line.startswith(b"Tgid:")), pid)
        with open(f"/proc/{pid}/stat", "rb") as f:
            flags = int(f.read().rsplit(b")", 1)[1].split()[6])
    except (OSError, ValueError, IndexError):
        return None
    if tgid != pid:
        return f"pid: {pid} is a thread of process {tgid}, not a process: register the process's pid"
    if flags & _PF_KTHREAD:
        return f"pid: {pid} is a kernel thread"
    return None


class Admission:
    """`checks_owner`: the caller's uid is known (the socket is served through a UnixFront): then a pid is
    registered only by its own user or root; else anyone may register any live process."""

    def __init__(
        self,
        registry: ProcessRegistry,
        *,
        checks_owner: bool,
        monotonic: Callable[[], float] = time.monotonic,
        pid_namespace: str | None = None,
    ) -> None:
        self._registry = registry
        self._checks_owner = checks_owner
        self._monotonic = monotonic
        self._pid_namespace = own_pid_namespace() if pid_namespace is None else pid_namespace
        self._lock = threading.Lock()
        self._unwatched: dict[str, tuple[int, float]] = {}  # session -> (pid, when registered), oldest first

    def check_register(
        self,
        pid: int,
        *,
        ancestry: int,
        job_id: str,
        text_len: int,
        hostname_len: int,
        pid_namespace: str,
        caller_uid: int | None,
    ) -> None:
        """Raises Refusal when `pid` may not be registered by this caller (`caller_uid`: None when unknown)."""
        if pid <= 0:
            raise _invalid("pid: required (> 0)")
        if ancestry > MAX_ANCESTRY:
            raise _invalid(f"ancestry: at most {MAX_ANCESTRY} pids")
        if not job_id_ok(job_id):  # StartTrace names no other: such a process could never be traced
            raise _invalid(f"job_id: {JOB_ID_RULE}")
        if text_len > MAX_TEXT or hostname_len > 256:
            raise _invalid("cmdline/hostname: too long")
        # A trainer in a container with its own pid namespace (the agent socket mounted into it) sends pids of that
        # namespace: its pid 1 is the host's init here, and two such jobs would take each other's registration.
        if pid_namespace and self._pid_namespace and pid_namespace[:32] != self._pid_namespace:
            raise Refusal(
                RefusalKind.PRECONDITION,
                RefusalReason.OTHER_PID_NAMESPACE,
                f"pid: process {pid} runs in another pid namespace than this daemon (a container?), where its "
                "pid names another process: it cannot register here; run the trainer in the daemon's pid namespace "
                "(e.g. docker run --pid=host) or a daemon in the trainer's",
            )
        # Any local user may call (0666): a pid that names no process here (made up, exited, or of another pid
        # namespace such as a container's) would only fill the registry until garbage collection.
        if not self._registry.is_alive(pid):
            raise Refusal(
                RefusalKind.INVALID,
                RefusalReason.NO_SUCH_PROCESS,
                f"pid: no process {pid} on this host (a trainer in another pid namespace, e.g. a container, "
                "cannot register with the host's daemon)",
            )
        problem = not_a_process(pid)
        if problem is not None:
            raise Refusal(RefusalKind.INVALID, RefusalReason.NO_SUCH_PROCESS, problem)
        refusal = self._not_owner(pid, caller_uid)
        if refusal is not None:
            raise Refusal(RefusalKind.NOT_PERMITTED, RefusalReason.NOT_OWNER, refusal)
        # Nor may it take over a live registration: it would receive the trainer's trace requests on its own Watch
        # stream and leave it untraced. The trainer's own agent registers again only after its stream ended
        # (reconnecting), when the entry is gone or no longer connected.
        current = self._registry.get(pid)
        if current is not None and current.protocol == PROTOCOL_AGENT and current.connected:
            raise Refusal(
                RefusalKind.PRECONDITION,
                RefusalReason.ALREADY_REGISTERED,
                f"pid: process {pid} is registered by a connected dyno agent (its Watch stream is open); a "
                "second registration would take its trace requests: register once that stream has ended",
            )

    def _not_owner(self, pid: int, caller_uid: int | None) -> str | None:
        """Why the caller may not register `pid` (None: it may): only the process's own user (the owner of
        /proc/<pid>) or root registers it, else another user could take its trace requests on their own Watch
        stream and make it join any job. The caller's uid is the kernel's (SO_PEERCRED, through the UnixFront)."""
        if not self._checks_owner:
            return None
        if caller_uid is None:
            return "cannot tell which user calls (not through dynod's agent socket): registration refused"
        owner = pid_uid(pid)
        if caller_uid in (0, owner):
            return None
        return (
            f"pid: process {pid} runs as uid {owner}, and uid {caller_uid} may register only its own processes "
            "(the trainer's agent registers itself)"
        )

    def admit(self) -> None:
        """Refuse a registration (FULL) while MAX_UNWATCHED others wait for their Watch stream, after dropping
        those that waited past UNWATCHED_GRACE_S (both read at each call): a registration without its stream stays
        until garbage collection (30 s) and anyone may register any live process, so re-registering others'
        processes in a loop would fill the registry's caps for every trainer, libkineto's included."""
        now = self._monotonic()
        with self._lock:
            stale = [(s, pid) for s, (pid, t) in self._unwatched.items() if now - t >= UNWATCHED_GRACE_S]
            for s, _ in stale:
                del self._unwatched[s]
            waiting = len(self._unwatched)
        for s, pid in stale:
            rec = self._registry.get(pid)
            if rec is not None and rec.session_id == s and not rec.connected:
                self._registry.remove(pid, "registered but never opened its Watch stream", session_id=s)
        if waiting >= MAX_UNWATCHED:
            raise Refusal(
                RefusalKind.FULL,
                RefusalReason.TOO_MANY_UNWATCHED,
                f"{waiting} agent registrations are waiting for their Watch stream (this daemon's limit); "
                "retry shortly",
            )

    def registered(self, session: str, pid: int) -> None:
        """A registration admitted: it waits for its Watch stream."""
        with self._lock:
            self._unwatched[session] = (pid, self._monotonic())

    def watched(self, session: str) -> None:
        with self._lock:
            self._unwatched.pop(session, None)

    def check_report(self, pid: int, session_id: str) -> None:
        """Raises Refusal (NOT_PERMITTED) when a report may not be believed: the socket is 0666 and grpc tells a
        servicer nothing of its caller, so any local user who knew a trace id and pid (ListProcesses and GetTrace
        list both) could mark another user's part FAILED. A report carries the session its pid's Register answered,
        which only its agent holds. An agent that did not say reports_with_session sends none: its reports are
        believed without one; a libkineto process never reports here."""
        rec = self._registry.get(pid)
        if rec is None or rec.protocol != PROTOCOL_AGENT:
            raise _refused(
                RefusalReason.NOT_REGISTERED,
                f"pid {pid} is not registered by a dyno agent: Register first, then report with its session",
            )
        if session_id:
            if not secrets.compare_digest(session_id.encode(), rec.session_id.encode()):
                raise _refused(
                    RefusalReason.WRONG_SESSION, f"session_id: not pid {pid}'s registration (it registered again?)"
                )
            return
        if rec.reports_with_session:
            raise _refused(
                RefusalReason.WRONG_SESSION,
                f"session_id: required (pid {pid}'s agent registered with reports_with_session)",
            )


def _invalid(message: str) -> Refusal:
    return Refusal(RefusalKind.INVALID, RefusalReason.BAD_REQUEST, message)


def _refused(reason: RefusalReason, message: str) -> Refusal:
    return Refusal(RefusalKind.NOT_PERMITTED, reason, message)

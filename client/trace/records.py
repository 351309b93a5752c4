"""The state of a cluster trace as plain records (one per host, one per process), shared by the engine
(trace/cluster.py), the progress views and the manifest; and the exit code it leads to."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field

from dyno.client.errors import DeadlineExceeded, DynoError, NotFound, PermissionDenied, Unauthenticated, Unavailable
from dyno.client.hosts import Host
from dyno.error_reasons import ErrorReason
from dyno.trace_ids import safe_host
from dyno.v1 import dyno_pb2

__all__ = [
    "FINAL_STATES",
    "FetchFailure",
    "HOST_DONE",
    "HOST_FAILED",
    "HOST_NO_MATCH",
    "HOST_TRACING",
    "HostRecord",
    "PreviousFile",
    "ProcRecord",
    "fetch_failure_of",
    "host_dir_name",
    "proc_record",
    "state_name",
    "trace_exit_code",
]

_STATES = {v.number: v.name.removeprefix("TRACE_STATE_").lower() for v in dyno_pb2.TraceState.DESCRIPTOR.values}
_PROTOCOL = {dyno_pb2.PROTOCOL_AGENT: "agent", dyno_pb2.PROTOCOL_KINETO: "kineto"}
FINAL_STATES = frozenset({"done", "failed", "timed_out", "cancelled", "lost", "busy"})

# Host states: tracing -> done | failed; no_match and failed are also reachable straight from StartTrace.
HOST_TRACING, HOST_DONE, HOST_FAILED, HOST_NO_MATCH = "tracing", "done", "failed", "no_match"


class FetchFailure(str, enum.Enum):
    """Why the file of a finished process did not arrive: the manifest's and --json's `processes[].fetch_failure`
    (docs/CLUSTER.md). Stable values: add new ones, never rename one."""

    NONE = ""  # it arrived, or the process did not finish (its `state` and `error` say why)
    UNAUTHENTICATED = "unauthenticated"  # the daemon refused the token or TLS identity
    PERMISSION_DENIED = "permission_denied"  # the daemon does not let this caller fetch it (another user's trace)
    NOT_FOUND = "not_found"  # the daemon no longer has the trace or its file (retention, a restart)
    UNREACHABLE = "unreachable"  # the daemon could not be reached, or went away mid-fetch
    INTERRUPTED = "interrupted"  # the user interrupted the run (Ctrl-C, SIGTERM)
    LOCAL_WRITE = "local_write"  # this machine could not write the file (a full disk, permissions)
    TIMED_OUT = "timed_out"  # the fetch ran past its deadline, or the host was given up at --timeout-s
    DAEMON_ERROR = "daemon_error"  # any other refusal or failure the daemon answered
    CLIENT_ERROR = "client_error"  # a failure in dyno-cli itself (its log has the traceback)


_FAILURE_BY_REASON = {
    ErrorReason.UNAUTHENTICATED.value: FetchFailure.UNAUTHENTICATED,
    ErrorReason.PERMISSION_DENIED.value: FetchFailure.PERMISSION_DENIED,
    ErrorReason.NOT_YOUR_PROCESS.value: FetchFailure.PERMISSION_DENIED,
    ErrorReason.CALLER_UNKNOWN.value: FetchFailure.PERMISSION_DENIED,
    ErrorReason.NOT_FOUND.value: FetchFailure.NOT_FOUND,
    ErrorReason.TRACE_NOT_FOUND.value: FetchFailure.NOT_FOUND,
    ErrorReason.TRACE_FORGOTTEN.value: FetchFailure.NOT_FOUND,
    ErrorReason.NO_TRACE_FILE.value: FetchFailure.NOT_FOUND,
    ErrorReason.SHUTTING_DOWN.value: FetchFailure.UNREACHABLE,
    ErrorReason.UNAVAILABLE.value: FetchFailure.UNREACHABLE,
}
# A daemon that sends no reason (or a failure of the channel itself): the status code's class says it
_FAILURE_BY_CLASS: tuple[tuple[type[DynoError], FetchFailure], ...] = (
    (Unauthenticated, FetchFailure.UNAUTHENTICATED),
    (PermissionDenied, FetchFailure.PERMISSION_DENIED),
    (NotFound, FetchFailure.NOT_FOUND),
    (Unavailable, FetchFailure.UNREACHABLE),
    (DeadlineExceeded, FetchFailure.TIMED_OUT),
)


def fetch_failure_of(e: DynoError) -> FetchFailure:
    """The FetchFailure of a failed call to a daemon: by its ErrorInfo reason, else by its status code."""
    by_reason = _FAILURE_BY_REASON.get(e.reason)
    if by_reason is not None:
        return by_reason
    return next((f for cls, f in _FAILURE_BY_CLASS if isinstance(e, cls)), FetchFailure.DAEMON_ERROR)


def host_dir_name(host: Host) -> str:
    """The host's folder under the trace folder: `name_port`, safe for any filesystem (IPv6 colons become _)."""
    return safe_host(f"{host.name}_{host.port}")


@dataclass
class ProcRecord:
    """One traced (or skipped) process of one host. Mutable: owned by ClusterTrace, copied for readers."""

    pid: int
    rank: int | None = None
    protocol: str = ""
    state: str = "pending"  # a TraceState name in lower case, or "busy" / "lost" (set by the client)
    error: str = ""
    remote_path: str = ""
    size_bytes: int = 0
    fetched_bytes: int = 0
    fetch: str = ""  # "" | fetching | fetched | failed
    file: str = ""  # relative to the trace folder, once fetched
    checksum: str = ""  # "xxh3_128:<hex>", verified on fetch
    fetch_s: float = 0.0
    reused: bool = False  # the file was already in the folder (an earlier fetch) and matched its checksum
    # The daemon's word on why it has not finished (ProcessTrace.waiting): what a process cancelled at --timeout-s
    # was waiting for ("" from a daemon without it)
    waiting: str = ""
    fetch_failure: FetchFailure = FetchFailure.NONE  # why a finished process's file did not arrive

    @property
    def ok(self) -> bool:
        return self.fetch == "fetched"

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["fetch_failure"] = self.fetch_failure.value
        return d


@dataclass
class HostRecord:
    host: Host
    dir: str
    state: str = HOST_TRACING
    hostname: str = ""
    error: str = ""
    error_type: str = ""
    message: str = ""
    matched_pids: list[int] = field(default_factory=list)
    busy_pids: list[int] = field(default_factory=list)
    registered_jobs: list[str] = field(default_factory=list)
    start_s: float = 0.0  # how long StartTrace took
    finished_ms: int = 0
    processes: list[ProcRecord] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.state in (HOST_FAILED, HOST_NO_MATCH)

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["host"] = str(self.host)
        del d["processes"]
        return d


@dataclass(frozen=True)
class PreviousFile:
    """A file an earlier run fetched into the trace folder, as its manifest recorded it."""

    file: str  # relative to the trace folder
    checksum: str  # "xxh3_128:<hex>", verified when it was fetched


def trace_exit_code(hosts: list[HostRecord]) -> int:
    """0: every host triggered and every process's file arrived; 1: no file arrived; 3: some did (partial)."""
    procs = [p for h in hosts for p in h.processes]
    if not any(p.ok for p in procs):
        return 1
    if any(h.failed for h in hosts) or not all(p.ok for p in procs):
        return 3
    return 0


def state_name(state: int) -> str:
    """A TraceState as the records name it: TRACE_STATE_TIMED_OUT -> "timed_out"."""
    return _STATES.get(state, "?")


def proc_record(p: dyno_pb2.ProcessTrace) -> ProcRecord:
    """A new record of a process from the daemon's ProcessTrace."""
    return ProcRecord(
        pid=p.pid,
        rank=p.rank if p.HasField("rank") else None,
        protocol=_PROTOCOL.get(p.protocol, ""),
        state=state_name(p.state),
        error=p.error,
        remote_path=p.path,
        size_bytes=p.size_bytes,
        waiting=p.waiting,
    )

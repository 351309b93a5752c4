"""The state of a cluster trace as plain records (one per host, one per process), shared by the engine
(trace/cluster.py), the progress views and the manifest; and the exit code it leads to."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from dyno.client.hosts import Host
from dyno.trace_ids import safe_host
from dyno.v1 import dyno_pb2

__all__ = [
    "FINAL_STATES",
    "HOST_DONE",
    "HOST_FAILED",
    "HOST_NO_MATCH",
    "HOST_TRACING",
    "HostRecord",
    "PreviousFile",
    "ProcRecord",
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

    @property
    def ok(self) -> bool:
        return self.fetch == "fetched"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


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

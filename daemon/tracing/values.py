"""Values passed between the tracing modules: states, requests, per-process views, agent commands, errors."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from dyno.error_reasons import ErrorReason

__all__ = [
    "TraceState",
    "FINAL_STATES",
    "TraceSpec",
    "TraceRequestError",
    "UnknownTraceError",
    "TraceLimitError",
    "ProcessTraceView",
    "TraceView",
    "StartResult",
    "AgentTraceCommand",
    "AgentCancelCommand",
    "AgentCommand",
]


class TraceState(str, Enum):
    PENDING = "pending"
    DELIVERED = "delivered"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


class TraceReason(Enum):
    """Why a process's part ended other than done, or how a done one was completed (ProcessTrace.reason); its
    `error` text says the same for people. Code branches on this, never on the text."""

    NONE = ""
    GONE_BEFORE_PICKUP = "gone_before_pickup"
    GONE_MID_TRACE = "gone_mid_trace"
    DISCONNECTED_MID_TRACE = "disconnected_mid_trace"
    NOT_PICKED_UP = "not_picked_up"
    DEADLINE_PASSED = "deadline_passed"
    CANCELLED_BY_REQUEST = "cancelled_by_request"
    AGENT_FAILED = "agent_failed"
    FILE_NOT_BELIEVED = "file_not_believed"
    PROFILER_BUSY = "profiler_busy"
    DAEMON_RESTARTED = "daemon_restarted"
    DONE_AFTER_RECONNECT = "done_after_reconnect"
    DONE_AFTER_RESTART = "done_after_restart"
    DONE_AT_DISCONNECT = "done_at_disconnect"
    PREEMPTED_BY_ON_DEMAND = "preempted_by_on_demand"  # cancelled: a periodic part, for an on-demand trace


FINAL_STATES = frozenset({TraceState.DONE, TraceState.FAILED, TraceState.TIMED_OUT, TraceState.CANCELLED})


class TraceRequestError(ValueError):
    """A bad request; `field` names the offending TraceRequest field; `reason`: the status's machine-readable one."""

    def __init__(self, field_name: str, message: str, reason: ErrorReason = ErrorReason.INVALID_REQUEST) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.reason = reason


class UnknownTraceError(LookupError):
    """No such trace id (or no such pid in it, or no file for it); `reason`: which (dyno.error_reasons)."""

    def __init__(self, message: str, reason: ErrorReason = ErrorReason.TRACE_NOT_FOUND) -> None:
        super().__init__(message)
        self.reason = reason


class TraceLimitError(RuntimeError):
    """Too many traces at once."""


@dataclass(frozen=True)
class TraceSpec:
    job_id: str
    pids: tuple[int, ...] = ()
    process_limit: int = 0
    duration_ms: int | None = None
    iterations: int | None = None
    start_time_ms: int | None = None
    start_iteration_roundup: int | None = None
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False
    trace_id: str = ""
    # taken by dynod's periodic profiling (dyno.daemon.profiling), never from a request: an on-demand trace of the
    # same processes cancels its parts, and it starts only in processes that are not tracing
    periodic: bool = False


@dataclass(frozen=True)
class ProcessTraceView:
    pid: int
    job_id: str
    rank: int | None
    protocol: str
    state: TraceState
    path: str
    size_bytes: int = 0
    error: str = ""
    updated_ms: int = 0
    # Why it has not finished yet, when it seems stuck (an agent's report, or dynod's account of a libkineto iteration
    # trace); kept when it ends other than done, so a cancelled process says what it was waiting for.
    waiting: str = ""
    uid: int = -1  # the traced process's user, as registered (its files must be its own); -1: unknown
    reason: TraceReason = TraceReason.NONE
    late_done: bool = False  # a DONE report came after it ended otherwise, and `error` says why it was not taken
    running_ms: int = 0  # when it turned RUNNING (its profiler started), 0: not (yet), or not known (an old record)


@dataclass(frozen=True)
class TraceView:
    trace_id: str
    spec: TraceSpec
    processes: tuple[ProcessTraceView, ...]
    finished: bool
    created_ms: int


@dataclass(frozen=True)
class StartResult:
    trace_id: str
    matched_pids: tuple[int, ...]
    triggered: tuple[ProcessTraceView, ...]
    busy_pids: tuple[int, ...]
    message: str
    registered_jobs: tuple[str, ...]


@dataclass(frozen=True)
class AgentTraceCommand:
    trace_id: str
    spec: TraceSpec
    output_path: Path
    deadline_ms: int


@dataclass(frozen=True)
class AgentCancelCommand:
    trace_id: str


AgentCommand = AgentTraceCommand | AgentCancelCommand

"""proto <-> domain conversions of the tracing subsystem (shared by the Dyno RPCs and the Agent service)."""

from __future__ import annotations

from dyno.daemon.process_roles import ROLE_DATALOADER, ROLE_LAUNCHER, ROLE_TRAINER
from dyno.daemon.registered_process import PROTOCOL_AGENT, PROTOCOL_KINETO, RegisteredProcess
from dyno.daemon.tracing.values import ProcessTraceView, TraceReason, TraceSpec, TraceState, TraceView
from dyno.trace_options import options_from_pb, options_to_pb
from dyno.v1 import agent_pb2, dyno_pb2

__all__ = [
    "PROTOCOL_TO_PB",
    "ROLE_TO_PB",
    "STATE_TO_PB",
    "STATE_FROM_PB",
    "process_to_pb",
    "process_trace_to_pb",
    "spec_from_pb",
    "spec_to_pb",
    "trace_view_to_pb",
    "trace_config_pb",
]

PROTOCOL_TO_PB = {PROTOCOL_AGENT: dyno_pb2.PROTOCOL_AGENT, PROTOCOL_KINETO: dyno_pb2.PROTOCOL_KINETO}
ROLE_TO_PB = {
    ROLE_TRAINER: dyno_pb2.PROCESS_ROLE_TRAINER,
    ROLE_LAUNCHER: dyno_pb2.PROCESS_ROLE_LAUNCHER,
    ROLE_DATALOADER: dyno_pb2.PROCESS_ROLE_DATALOADER,
}
STATE_TO_PB = {
    TraceState.PENDING: dyno_pb2.TRACE_STATE_PENDING,
    TraceState.DELIVERED: dyno_pb2.TRACE_STATE_DELIVERED,
    TraceState.RUNNING: dyno_pb2.TRACE_STATE_RUNNING,
    TraceState.DONE: dyno_pb2.TRACE_STATE_DONE,
    TraceState.FAILED: dyno_pb2.TRACE_STATE_FAILED,
    TraceState.TIMED_OUT: dyno_pb2.TRACE_STATE_TIMED_OUT,
    TraceState.CANCELLED: dyno_pb2.TRACE_STATE_CANCELLED,
}
STATE_FROM_PB = {v: k for k, v in STATE_TO_PB.items()}


def process_to_pb(p: RegisteredProcess, role: str = "") -> dyno_pb2.ProcessInfo:
    """`role`: dyno.daemon.process_roles' (TraceManager.roles), "" when not known (unspecified)."""
    msg = dyno_pb2.ProcessInfo(
        pid=p.pid,
        ancestry=list(p.ancestry),
        job_id=p.job_id,
        gpu=p.gpu,
        protocol=PROTOCOL_TO_PB.get(p.protocol, dyno_pb2.PROTOCOL_UNSPECIFIED),
        registered_ms=p.registered_ms,
        last_seen_ms=p.last_seen_ms,
        busy=p.busy,
        current_trace_id=p.current_trace_id,
        cmdline=p.cmdline,
        hostname=p.hostname,
        role=ROLE_TO_PB.get(role, dyno_pb2.PROCESS_ROLE_UNSPECIFIED),
    )
    for name in ("rank", "local_rank", "world_size"):
        value = getattr(p, name)
        if value is not None:
            setattr(msg, name, value)
    return msg


# TraceReason.NONE is TRACE_REASON_UNSPECIFIED; the others share their names
REASON_TO_PB: dict[TraceReason, dyno_pb2.TraceReason] = {
    r: dyno_pb2.TraceReason.Value("TRACE_REASON_" + ("UNSPECIFIED" if r == TraceReason.NONE else r.name))
    for r in TraceReason
}


def process_trace_to_pb(v: ProcessTraceView) -> dyno_pb2.ProcessTrace:
    msg = dyno_pb2.ProcessTrace(
        pid=v.pid,
        job_id=v.job_id,
        protocol=PROTOCOL_TO_PB.get(v.protocol, dyno_pb2.PROTOCOL_UNSPECIFIED),
        state=STATE_TO_PB[v.state],
        path=v.path,
        size_bytes=v.size_bytes,
        error=v.error,
        updated_ms=v.updated_ms,
        waiting=v.waiting,
        reason=REASON_TO_PB[v.reason],
    )
    if v.rank is not None:
        msg.rank = v.rank
    return msg


def spec_from_pb(r: dyno_pb2.TraceRequest) -> TraceSpec:
    return TraceSpec(
        job_id=r.job_id, pids=tuple(r.pids), process_limit=r.process_limit, trace_id=r.trace_id, **options_from_pb(r)
    )


def spec_to_pb(s: TraceSpec) -> dyno_pb2.TraceRequest:
    return dyno_pb2.TraceRequest(
        job_id=s.job_id, pids=list(s.pids), process_limit=s.process_limit, trace_id=s.trace_id, **options_to_pb(s)
    )


def trace_view_to_pb(v: TraceView, hostname: str) -> dyno_pb2.TraceStatus:
    return dyno_pb2.TraceStatus(
        trace_id=v.trace_id,
        request=spec_to_pb(v.spec),
        processes=[process_trace_to_pb(p) for p in v.processes],
        finished=v.finished,
        created_ms=v.created_ms,
        hostname=hostname,
    )


def trace_config_pb(trace_id: str, spec: TraceSpec, output_path: str, deadline_ms: int) -> agent_pb2.TraceConfig:
    return agent_pb2.TraceConfig(
        trace_id=trace_id, output_path=output_path, deadline_ms=deadline_ms, **options_to_pb(spec)
    )

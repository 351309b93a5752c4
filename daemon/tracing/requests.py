"""Validation of a trace request (TraceSpec): every field bounded, errors naming the field, a trace id chosen; and
why a valid request matched no process."""

from __future__ import annotations

from dataclasses import replace

from dyno.daemon.registered_process import RegisteredProcess
from dyno.daemon.tracing.values import TraceRequestError, TraceSpec
from dyno.error_reasons import ErrorReason
from dyno.request_limits import (
    JOB_ID_RULE,
    MAX_DURATION_MS,
    MAX_FUTURE_START_MS,
    MAX_ITERATIONS,
    MAX_PAST_START_MS,
    MAX_PIDS,
    job_id_ok,
)
from dyno.trace_ids import new_trace_id, validate_trace_id

__all__ = ["only_launchers", "others_only", "validate_spec", "why_nothing"]


def validate_spec(spec: TraceSpec, now_ms: int) -> TraceSpec:
    """Raises TraceRequestError naming the field; returns the spec with a trace id."""
    job = spec.job_id.strip()
    if not job:
        raise TraceRequestError("job_id", "required")
    if not job_id_ok(job):
        raise TraceRequestError("job_id", JOB_ID_RULE)
    if len(spec.pids) > MAX_PIDS or any(p <= 0 for p in spec.pids):
        raise TraceRequestError("pids", f"at most {MAX_PIDS} positive pids")
    if spec.process_limit < 0:
        raise TraceRequestError("process_limit", "must be >= 0 (0: no limit)")
    if (spec.duration_ms is None) == (spec.iterations is None):
        raise TraceRequestError("duration_ms", "exactly one of duration_ms and iterations is required")
    if spec.duration_ms is not None and not 1 <= spec.duration_ms <= MAX_DURATION_MS:
        raise TraceRequestError("duration_ms", f"must be 1..{MAX_DURATION_MS}")
    if spec.iterations is not None and not 1 <= spec.iterations <= MAX_ITERATIONS:
        raise TraceRequestError("iterations", f"must be 1..{MAX_ITERATIONS}")
    if spec.start_time_ms is not None:
        if spec.duration_ms is None:
            raise TraceRequestError("start_time_ms", "only with duration_ms (use start_iteration_roundup)")
        now = now_ms
        if not now - MAX_PAST_START_MS <= spec.start_time_ms <= now + MAX_FUTURE_START_MS:
            raise TraceRequestError(
                "start_time_ms",
                f"must be within {MAX_PAST_START_MS / 1000:g} s in the past .. {MAX_FUTURE_START_MS / 1000:g} s in "
                "the future",
                ErrorReason.START_TIME_OUT_OF_RANGE,
            )
    if spec.start_iteration_roundup is not None:
        if spec.iterations is None:
            raise TraceRequestError("start_iteration_roundup", "only with iterations")
        if not 1 <= spec.start_iteration_roundup <= MAX_ITERATIONS:
            raise TraceRequestError("start_iteration_roundup", f"must be 1..{MAX_ITERATIONS}")
    trace_id = spec.trace_id or new_trace_id(now_ms / 1000)
    try:
        validate_trace_id(trace_id)
    except ValueError as e:
        raise TraceRequestError("trace_id", str(e)) from None
    return replace(spec, job_id=job, trace_id=trace_id)


def why_nothing(spec: TraceSpec, job_pids: list[int], jobs: tuple[str, ...], hostname: str) -> str:
    """Why a request matched nothing, given the pids registered for its job and every registered job."""
    where = f"on host {hostname}"
    if not job_pids:
        if not jobs:
            return f"no process of job {spec.job_id!r} is registered {where}: no processes are registered at all"
        return f"no process of job {spec.job_id!r} is registered {where}; registered jobs: " + ", ".join(
            repr(j) for j in jobs
        )
    return (
        f"{len(job_pids)} process(es) of job {spec.job_id!r} registered {where}, none with pid(s) "
        f"{', '.join(map(str, spec.pids))} as their own pid or in their ancestry "
        f"(pids: {', '.join(map(str, job_pids))})"
    )


def only_launchers(spec: TraceSpec, selected: list[RegisteredProcess], hostname: str) -> str:
    """Why a request selected torch launchers only (never traced), naming them; "" when it selected none."""
    launchers = [p for p in selected if p.launcher]
    if not launchers:
        return ""
    which = ", ".join(f"pid {p.pid} ({p.launcher})" for p in launchers)
    return (
        f"only torch's launcher of job {spec.job_id!r} matched on host {hostname} ({which}), and a launcher is never "
        "traced: its workers have not registered (yet: libkineto registers a process when it imports torch)"
    )


def others_only(spec: TraceSpec, others: list[RegisteredProcess], uid: int, hostname: str) -> str:
    """Why a request of user `uid` matched only other users' processes."""
    pids = ", ".join(str(p.pid) for p in others[:8]) + ("..." if len(others) > 8 else "")
    return (
        f"the {len(others)} matching process(es) of job {spec.job_id!r} on host {hostname} (pid {pids}) run as other "
        f"users: uid {uid} may trace only its own processes (root, dynod's user and its admin group trace any)"
    )

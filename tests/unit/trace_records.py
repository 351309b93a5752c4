"""Trace records written as dynod writes them (journal.write_record over a trust-checked trace dir), for the tests
of what a starting dynod reads back from them (dyno.daemon.tracing.recorded and its callers)."""

from __future__ import annotations

import os
from pathlib import Path

from dyno.daemon.registered_process import PROTOCOL_AGENT
from dyno.daemon.tracing import journal
from dyno.daemon.tracing.trust import make_trace_dir
from dyno.daemon.tracing.values import ProcessTraceView, TraceSpec, TraceState, TraceView
from dyno.trace_layout import RECORD_NAME, agent_output


def write_trace_record(
    trace_dir: Path,
    trace_id: str,
    *,
    job_id: str = "job-1",
    state: TraceState = TraceState.DONE,
    file: bool = True,
    periodic: bool = False,
    start_iteration_roundup: int | None = None,
    created_ms: int,
    updated_ms: int,
    running_ms: int = 0,
    uid: int = -1,
    recorded_ms: int,
    mtime_s: float | None = None,
) -> Path:
    """The record path of a one-process trace (pid 7 on host "h", 5 iterations) of `job_id`, recorded at
    `recorded_ms`; the process's file is written when it is DONE and `file` is true; the trace is finished unless
    RUNNING. `mtime_s`, if given, dates the record (what recorded_traces orders by)."""
    make_trace_dir(trace_dir, trace_id)
    path = agent_output(trace_dir, trace_id, "h", 7)
    if state == TraceState.DONE and file:
        path.write_bytes(b"trace")
    proc = ProcessTraceView(
        7, job_id, 0, PROTOCOL_AGENT, state, str(path), 5, updated_ms=updated_ms, uid=uid, running_ms=running_ms
    )
    spec = TraceSpec(
        job_id=job_id,
        iterations=5,
        start_iteration_roundup=start_iteration_roundup,
        trace_id=trace_id,
        periodic=periodic,
    )
    view = TraceView(trace_id, spec, (proc,), state != TraceState.RUNNING, created_ms)
    assert journal.write_record(trace_dir, view, "h", recorded_ms) is not None
    record = trace_dir / trace_id / RECORD_NAME
    if mtime_s is not None:
        os.utime(record, (mtime_s, mtime_s))
    return record

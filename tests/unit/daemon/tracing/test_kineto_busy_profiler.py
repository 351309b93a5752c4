"""A KINETO_USE_DAEMON=1 trainer running its own torch.profiler polls without asking for an activity config
(type & 2 clear) for as long as its profiler runs: a request to it fails after a few such polls, saying why; a
process that is busy only briefly (a poll or two) still gets the request."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_proc import ProcTable, kineto_manager

from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.values import TraceSpec, TraceState

pytestmark = pytest.mark.unit

WORKER = b"python3\0-u\0train.py\0"
IDLE, BUSY = 3, 1  # libkineto's req type: activity profiler wanted (2) or not


def poll(type_mask: int) -> KinetoPoll:
    return KinetoPoll(pid=101, ancestry=(50,), job_id="7", type_mask=type_mask)


def test_a_process_whose_profiler_stays_busy_fails_with_the_reason(tmp_path: Path) -> None:
    tm = kineto_manager(tmp_path, ProcTable({101: ("python3", WORKER)}), [poll(IDLE)])
    trace_id = tm.start(TraceSpec(job_id="7", duration_ms=500)).trace_id
    for _ in range(3):
        assert tm.kineto_poll(poll(BUSY)) is None
    proc = tm.get(trace_id).processes[0]
    assert proc.state == TraceState.FAILED  # was: pending until the client's timeout
    assert "its profiler is busy" in proc.error and "own torch.profiler or an earlier trace" in proc.error
    # not busy for dynod any more: the next request reaches it once its profiler is idle again
    again = tm.start(TraceSpec(job_id="7", duration_ms=500))
    assert [v.pid for v in again.triggered] == [101]
    assert tm.kineto_poll(poll(IDLE)) is not None


def test_a_process_busy_for_a_poll_or_two_still_gets_the_request(tmp_path: Path) -> None:
    tm = kineto_manager(tmp_path, ProcTable({101: ("python3", WORKER)}), [poll(IDLE)])
    trace_id = tm.start(TraceSpec(job_id="7", duration_ms=500)).trace_id
    for _ in range(2):
        assert tm.kineto_poll(poll(BUSY)) is None
    assert tm.kineto_poll(poll(IDLE)) is not None
    assert tm.get(trace_id).processes[0].state == TraceState.DELIVERED

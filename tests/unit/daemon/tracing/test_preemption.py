"""On-demand wins over periodic profiling, through the trace manager: only periodic parts are cancelled (an on-demand
trace never preempts another on-demand one), libkineto processes included, and the processes a request does not
name keep their periodic part."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_proc import host_a_manager
from manual_clock import Clock

from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import TraceReason, TraceSpec, TraceState

pytestmark = pytest.mark.unit


@pytest.fixture
def tm(tmp_path: Path) -> TraceManager:
    clock = Clock()
    reg = ProcessRegistry(
        silent_timeout_s=30, is_alive=lambda pid: True, clock_ms=clock, uid_of=lambda pid: os.getuid()
    )
    for pid, rank in ((7, 0), (8, 1)):
        reg.register(RegisteredProcess(pid=pid, job_id="J", protocol=PROTOCOL_AGENT, rank=rank, session_id=f"s{pid}"))
    return host_a_manager(reg, tmp_path / "traces", clock)


def _periodic(pids: tuple[int, ...], trace_id: str = "periodic-J-20261202T000000Z") -> TraceSpec:
    return TraceSpec(job_id="J", pids=pids, process_limit=len(pids), iterations=5, trace_id=trace_id, periodic=True)


def test_only_the_named_processes_lose_their_periodic_part(tm: TraceManager) -> None:
    periodic = tm.start(_periodic((7, 8)))
    assert len(periodic.triggered) == 2
    on_demand = tm.start(TraceSpec(job_id="J", pids=(7,), iterations=3))
    assert [v.pid for v in on_demand.triggered] == [7] and not on_demand.busy_pids
    parts = {p.pid: p for p in tm.get(periodic.trace_id).processes}
    assert parts[7].state == TraceState.CANCELLED and parts[7].reason == TraceReason.PREEMPTED_BY_ON_DEMAND
    assert parts[8].state == TraceState.PENDING  # not named by the on-demand request: it goes on


def test_an_on_demand_trace_never_preempts_another(tm: TraceManager) -> None:
    first = tm.start(TraceSpec(job_id="J", iterations=3))
    second = tm.start(TraceSpec(job_id="J", iterations=3))
    assert second.triggered == () and set(second.busy_pids) == {7, 8}
    assert all(p.state == TraceState.PENDING for p in tm.get(first.trace_id).processes)


def test_a_libkineto_part_is_preempted_too(tm: TraceManager) -> None:
    tm.kineto_poll(KinetoPoll(pid=300, ancestry=(), job_id="K", type_mask=3))
    periodic = tm.start(
        TraceSpec(job_id="K", pids=(300,), duration_ms=2000, trace_id="periodic-K-20261202T000000Z", periodic=True)
    )
    assert tm.kineto_poll(KinetoPoll(pid=300, ancestry=(), job_id="K", type_mask=3))  # delivered its config
    on_demand = tm.start(TraceSpec(job_id="K", duration_ms=500))
    assert [v.pid for v in on_demand.triggered] == [300]
    part = tm.get(periodic.trace_id).processes[0]
    assert part.state == TraceState.CANCELLED and part.reason == TraceReason.PREEMPTED_BY_ON_DEMAND
    assert on_demand.trace_id in part.error


def test_the_record_on_disk_says_preempted(tm: TraceManager) -> None:
    periodic = tm.start(_periodic((7,)))
    tm.start(TraceSpec(job_id="J", pids=(7,), iterations=3))
    tm.table.traces.pop(periodic.trace_id)  # forgotten in memory: read back from its folder's record
    part = tm.get(periodic.trace_id).processes[0]
    assert part.state == TraceState.CANCELLED and part.reason == TraceReason.PREEMPTED_BY_ON_DEMAND

"""Periodic profiling over a real trace manager (fake processes, a hand-set clock): two "hosts" take the same moment
under the same trace id, the budget is measured from the trace's records, an on-demand trace wins, periodic traces
never overlap another, and retention bounds their folders like any trace's."""

from __future__ import annotations

import logging
import os
import queue
import time
from pathlib import Path

import pytest
from fake_proc import no_proc_identifier
from manual_clock import Clock

from dyno.daemon.jobs.records import JobRecord
from dyno.daemon.profiling.periodic import SCAN_MS, TICK_S, PeriodicProfiler
from dyno.daemon.profiling.policy import LATE_MS, JobState, PeriodicSettings, SkipReason
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing import retention
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import (
    AgentCancelCommand,
    AgentCommand,
    AgentTraceCommand,
    TraceReason,
    TraceSpec,
    TraceState,
)

pytestmark = pytest.mark.unit

SETTINGS = PeriodicSettings(interval_ms=60_000, iterations=5, duration_ms=2_000, budget=0.05, min_job_age_ms=10_000)


class Host:
    """One host: registry, trace manager, one agent trainer (pid 7, rank 0 of job J), and its periodic profiler."""

    def __init__(self, root: Path, clock: Clock, started_ms: int) -> None:
        self.clock = clock
        self.reg = ProcessRegistry(
            silent_timeout_s=30, is_alive=lambda pid: True, clock_ms=clock, uid_of=lambda pid: os.getuid()
        )
        self.tm = TraceManager(
            self.reg, root / "traces", root.name, clock_ms=clock, kineto_identifier=no_proc_identifier()
        )
        self.reg.register(RegisteredProcess(pid=7, job_id="J", protocol=PROTOCOL_AGENT, rank=0, session_id="s7"))
        self.reg.set_connected(7, "s7", True)
        self.q: queue.Queue[AgentCommand | None] = self.tm.agent_attach(7, "s7")
        self.records = [JobRecord("J", "u", root.name, started_ms, started_ms, running=True)]
        self.periodic = PeriodicProfiler(SETTINGS, self.tm, self.reg, lambda: self.records, clock_ms=clock)

    def command(self) -> AgentCommand | None:
        return self.q.get_nowait()

    def finish(self, cmd: AgentTraceCommand, recording_ms: int) -> None:
        """The agent records for `recording_ms` and reports its file."""
        self.tm.agent_delivered(7, cmd.trace_id)
        self.tm.agent_report(7, cmd.trace_id, TraceState.RUNNING)
        self.clock.ms += recording_ms
        cmd.output_path.write_bytes(b"trace")
        self.tm.agent_report(7, cmd.trace_id, TraceState.DONE)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _at_next_moment(p: PeriodicProfiler, clock: Clock) -> int:
    clock.ms = p.schedule.next_moment("J", clock.ms)
    return clock.ms


def _periodic_trace(h: Host, clock: Clock) -> tuple[str, AgentCommand | None]:
    """The periodic trace `h` starts at its job's next moment: its id, and the first command its process hears."""
    _at_next_moment(h.periodic, clock)
    trace_id = h.periodic.tick()[0][1]
    return trace_id, h.command()


def test_two_hosts_take_the_same_moment_under_the_same_trace_id(tmp_path: Path, clock: Clock) -> None:
    a = Host(tmp_path / "a", clock, clock.ms - 600_000)
    b = Host(tmp_path / "b", clock, clock.ms - 500_000)
    clock.ms = a.periodic.schedule.next_moment("J", clock.ms) - LATE_MS - 1  # between moments: nothing due yet
    assert [why for _, _, why in a.periodic.tick()] == [SkipReason.LATE]  # the last one passed 49 s ago
    assert [why for _, _, why in b.periodic.tick()] == [SkipReason.LATE]
    assert a.q.empty() and b.q.empty()
    moment = _at_next_moment(a.periodic, clock)
    (ja, ta, wa), (jb, tb, wb) = a.periodic.tick()[0], b.periodic.tick()[0]
    assert (ja, wa) == (jb, wb) == ("J", None)
    assert ta == tb == a.periodic.schedule.trace_id("J", moment) and ta.startswith("periodic-J-")
    ca, cb = a.command(), b.command()
    assert isinstance(ca, AgentTraceCommand) and isinstance(cb, AgentTraceCommand)
    assert ca.trace_id == cb.trace_id == ta
    assert ca.spec.iterations == 5 and ca.spec.start_iteration_roundup == 10 and ca.spec.periodic
    assert a.periodic.tick() == []  # a moment is handled once


def _host_after_a_9_s_trace(folder: Path, clock: Clock) -> Host:
    """A host whose job (100 s old) had one periodic trace that recorded 9 s: a long trace for a 5% budget."""
    h = Host(folder, clock, clock.ms - 100_000)
    _, cmd = _periodic_trace(h, clock)
    assert isinstance(cmd, AgentTraceCommand)
    h.finish(cmd, recording_ms=9_000)
    h.periodic.tick()
    return h


def test_the_budget_is_measured_and_skips_moments(
    tmp_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    h = _host_after_a_9_s_trace(tmp_path / "a", clock)
    assert h.periodic.budget.usage("J").profiled_ms == 9_000
    _at_next_moment(h.periodic, clock)  # ~170 s old: (9 + 9) s > 5% of (170 + 9) s
    with caplog.at_level(logging.INFO, logger="dyno.daemon.profiling.periodic"):
        assert h.periodic.tick()[0][2] == SkipReason.BUDGET
    assert h.q.empty() and "over budget: 9.0 s profiled" in caplog.text
    for _ in range(4):  # the job ages: the budget allows a trace again
        _at_next_moment(h.periodic, clock)
        if h.periodic.tick()[0][2] is None:
            break
    assert isinstance(h.command(), AgentTraceCommand)


def test_a_restarted_dynod_resumes_the_budget_from_the_trace_records(
    tmp_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    before = _host_after_a_9_s_trace(tmp_path / "a", clock).periodic.budget.usage("J")

    restarted = Host(tmp_path / "a", clock, clock.ms - 100_000)  # the same trace dir, nothing in memory
    with caplog.at_level(logging.INFO, logger="dyno.daemon.profiling.periodic"):
        restarted.periodic.resume()
    assert restarted.periodic.budget.usage("J") == before and before.profiled_ms == 9_000
    assert "budget resumed from 1 periodic trace record(s) of 1 job(s)" in caplog.text
    assert "9.0 s under the profiler" in caplog.text
    _at_next_moment(restarted.periodic, clock)  # as before the restart: (9 + 9) s > 5% of the job's ~3 min
    assert restarted.periodic.tick()[0][2] == SkipReason.BUDGET
    assert restarted.q.empty()


def test_an_on_demand_trace_wins_over_a_periodic_one(tmp_path: Path, clock: Clock) -> None:
    h = Host(tmp_path / "a", clock, clock.ms - 600_000)
    periodic_id, periodic_cmd = _periodic_trace(h, clock)
    assert isinstance(periodic_cmd, AgentTraceCommand)
    h.tm.agent_delivered(7, periodic_id)
    h.tm.agent_report(7, periodic_id, TraceState.RUNNING)
    result = h.tm.start(TraceSpec(job_id="J", iterations=3))
    assert [v.pid for v in result.triggered] == [7] and "periodic trace" in result.message
    part = h.tm.get(periodic_id).processes[0]
    assert part.state == TraceState.CANCELLED and part.reason == TraceReason.PREEMPTED_BY_ON_DEMAND
    assert result.trace_id in part.error
    # the agent hears the cancel first, then the on-demand request
    cancel, on_demand = h.command(), h.command()
    assert isinstance(cancel, AgentCancelCommand) and cancel.trace_id == periodic_id
    assert isinstance(on_demand, AgentTraceCommand) and on_demand.trace_id == result.trace_id
    assert h.reg.get(7).busy  # busy with the on-demand trace
    # the next moment finds the process tracing on demand: skipped, never interrupting it
    _at_next_moment(h.periodic, clock)
    assert h.periodic.tick()[0][2] == SkipReason.BUSY
    assert h.q.empty()
    assert h.tm.get(result.trace_id).processes[0].state == TraceState.PENDING  # not cancelled


def test_a_periodic_request_never_takes_a_busy_process(tmp_path: Path, clock: Clock) -> None:
    h = Host(tmp_path / "a", clock, clock.ms - 600_000)
    on_demand = h.tm.start(TraceSpec(job_id="J", iterations=3))
    h.command()
    r = h.tm.start(TraceSpec(job_id="J", iterations=3, pids=(7,), trace_id="periodic-J-x", periodic=True))
    assert r.triggered == () and r.busy_pids == (7,)
    assert h.tm.get(on_demand.trace_id).processes[0].state == TraceState.PENDING  # untouched
    assert h.q.empty()


def test_young_and_ended_jobs_are_skipped(tmp_path: Path, clock: Clock) -> None:
    h = Host(tmp_path / "a", clock, clock.ms)
    _at_next_moment(h.periodic, clock)
    h.records = [JobRecord("J", "u", "a", clock.ms - 5_000, clock.ms, running=True)]
    assert h.periodic.tick()[0][2] == SkipReason.TOO_YOUNG
    h.records = []  # job accounting does not count it (ended, or not seen yet)
    _at_next_moment(h.periodic, clock)
    assert h.periodic.tick()[0][2] == SkipReason.NOT_RUNNING
    h.records = [JobRecord("J", "u", "a", clock.ms - 600_000, clock.ms, running=True)]
    h.reg.set_connected(7, "s7", False)  # its agent's stream ended: the process is going
    _at_next_moment(h.periodic, clock)
    assert h.periodic.tick()[0][2] == SkipReason.ENDING
    assert h.q.empty()


def test_a_skip_line_held_back_by_the_throttle_builds_no_text(
    tmp_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = Host(tmp_path / "a", clock, clock.ms)
    built: list[SkipReason] = []
    why = h.periodic._why

    def counted(job: JobState, reason: SkipReason, detail: str, now: int) -> str:
        built.append(reason)
        return why(job, reason, detail, now)

    monkeypatch.setattr(h.periodic, "_why", counted)
    h.records = []  # not running: every moment is skipped for the same reason
    with caplog.at_level(logging.INFO, logger="dyno.daemon.profiling.periodic"):
        for _ in range(3):  # a minute apart: within the throttle's 10 minutes, one line
            _at_next_moment(h.periodic, clock)
            assert h.periodic.tick()[0][2] == SkipReason.NOT_RUNNING
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == 1 and "the job is not running in job accounting" in skipped[0]
    assert built == [SkipReason.NOT_RUNNING]  # the logged line's text only
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="dyno.daemon.profiling.periodic"):  # held-back lines go to DEBUG
        _at_next_moment(h.periodic, clock)
        h.periodic.tick()
    assert built == [SkipReason.NOT_RUNNING] * 2
    assert [r.levelno for r in caplog.records if "skipped" in r.getMessage()] == [logging.DEBUG]


def test_status_says_on_with_the_interval_and_next_moment(tmp_path: Path, clock: Clock) -> None:
    h = Host(tmp_path / "a", clock, clock.ms)
    text = h.periodic.describe()
    nxt = h.periodic.schedule.next_moment("J", clock.ms)
    assert text.startswith("on: every 60 s") and "budget 5%" in text
    assert f"next: J at {time.strftime('%H:%M:%SZ', time.gmtime(nxt // 1000))}" in text


def test_retention_removes_finished_periodic_traces_like_any_other(tmp_path: Path, clock: Clock) -> None:
    h = Host(tmp_path / "a", clock, clock.ms - 600_000)
    trace_id, cmd = _periodic_trace(h, clock)
    assert isinstance(cmd, AgentTraceCommand)
    h.finish(cmd, recording_ms=100)
    h.tm.start(TraceSpec(job_id="J", iterations=1, trace_id="newer"))  # retention never removes the newest
    folder = h.tm.trace_dir / trace_id
    assert folder.is_dir()
    old = time.time() - 7200
    os.utime(folder, (old, old))
    result = retention.enforce_retention(h.tm.trace_dir, max_bytes=1 << 30, max_age_s=3600, keep={"newer"})
    assert trace_id in result.removed and not folder.exists()


def test_new_jobs_are_found_within_a_scan_and_gone_ones_forgotten(tmp_path: Path, clock: Clock) -> None:
    h = Host(tmp_path / "a", clock, clock.ms - 600_000)
    h.periodic.tick()
    h.reg.register(RegisteredProcess(pid=9, job_id="K", protocol=PROTOCOL_AGENT, rank=0, session_id="s9"))
    h.reg.set_connected(9, "s9", True)
    h.records.append(JobRecord("K", "u", "a", clock.ms - 600_000, clock.ms, running=True))
    assert h.periodic.tick() == []  # not looked for yet: passes between scans cost nothing
    clock.ms = h.periodic.schedule.next_moment("K", clock.ms + SCAN_MS)
    assert ("K", None) in [(job, why) for job, _, why in h.periodic.tick()]
    assert h.reg.remove(9, "test") is not None
    clock.ms += SCAN_MS
    h.periodic.tick()
    assert "K" not in h.periodic._handled


def test_the_thread_wakes_at_the_next_moment_not_a_tick_later(tmp_path: Path, clock: Clock) -> None:
    h = Host(tmp_path / "a", clock, clock.ms - 600_000)
    assert h.periodic._sleep_s() == TICK_S  # no job known yet
    h.periodic.tick()
    moment = h.periodic.schedule.next_moment("J", clock.ms)
    clock.ms = moment - 40
    assert h.periodic._sleep_s() == pytest.approx(0.040)
    clock.ms = moment + 5  # due: the shortest wait, never a spin
    assert h.periodic._sleep_s() == 0.001

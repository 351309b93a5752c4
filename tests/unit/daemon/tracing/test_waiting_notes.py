"""Why an --iterations trace has not finished ("waiting" notes), on each side, with hand-set clocks:

- the agent sends its note (no optimizer step for N s ...) while it waits, throttled, and clears it once recording;
- dynod keeps an agent's note (ProcessTrace.waiting), through a cancel, and drops it once the process is done;
- dynod tells where a libkineto iteration trace stands from its polls (picked up, not recording / recording), says
  so in the note, in the reason of its deadline (how long, what to do) and when the process exits before the end;
- dyno-cli's cancel at --timeout-s says what each process was waiting for (or, without a note, what it was doing).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from fake_proc import host_a_manager
from manual_clock import Clock, TickingClock
from until_cancelled_fake import RunsUntilCancelled

from dyno.client.agent.spec import AgentTraceSpec, TraceFailed, now_ms
from dyno.client.agent.steps import NO_STEP_S, StepCounter
from dyno.client.agent.trace import run_trace
from dyno.client.cluster import Cluster
from dyno.client.hosts import Host
from dyno.client.trace.cluster import ClusterTrace
from dyno.daemon.fake_server import serve
from dyno.daemon.proto_convert import process_trace_to_pb
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing import journal as tj
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.table import TraceLimits
from dyno.daemon.tracing.values import TraceSpec, TraceState
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


# -- the agent --------------------------------------------------------------------------------------------------


def test_agent_reports_why_it_waits_and_the_note_reaches_no_deadline(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    clock = TickingClock(tick=5.0)  # 5 s pass per clock read
    steps = StepCounter(clock)  # a young process (it may still be starting up): it waits, it does not give up
    steps._installed = True
    spec = AgentTraceSpec(
        trace_id="t-wait",
        output_path=tmp_path / "host_1.pt.trace.json.gz",
        iterations=3,
        start_iteration_roundup=10,
        deadline_ms=now_ms() + 600_000,
    )
    cancel = threading.Event()
    notes: list[tuple[str, bool]] = []

    def on_waiting(note: str, recording: bool) -> None:
        notes.append((note, recording))
        cancel.set()  # dyno-cli's --timeout-s: the daemon has the note by now

    with pytest.raises(TraceFailed, match="cancelled"):
        run_trace(spec, steps, cancel, lambda: pytest.fail("no step: nothing records"), on_waiting=on_waiting)
    ((note, recording),) = notes
    assert not recording
    assert note.startswith("no optimizer step in") and "has not called optimizer.step()" in note
    assert "--duration-ms" in note


def test_waiting_note_of_a_recording_trace_counts_its_steps() -> None:
    clock = TickingClock()
    steps = StepCounter(clock)
    for _ in range(4):
        steps._hook(None, (), {})
        clock.t += 1.0

    class Plan:
        started = threading.Event()
        steps_seen = 2
        spec = AgentTraceSpec(trace_id="t", output_path=Path("x"), iterations=5)

    Plan.started.set()
    since = steps.now()
    assert steps.waiting_note(Plan(), since) == ""  # it steps as usual
    clock.t += NO_STEP_S + 1
    note = steps.waiting_note(Plan(), since)
    assert note.startswith("recorded 2 of 5 optimizer steps; no optimizer step for"), note
    assert "stopped stepping its optimizer" in note


# -- dynod: agent processes -------------------------------------------------------------------------------------


@pytest.fixture
def tm(tmp_path: Path):  # type: ignore[no-untyped-def]
    clock = Clock()
    alive: set[int] = {10, 300}
    reg = ProcessRegistry(is_alive=lambda pid: pid in alive, clock_ms=clock, uid_of=lambda pid: os.getuid())
    manager = host_a_manager(reg, tmp_path / "traces", clock, TraceLimits(iteration_timeout_s=600))
    return clock, alive, reg, manager


def _delivered(reg: ProcessRegistry, manager: TraceManager, trace_id: str) -> str:
    """A 3-step trace `trace_id` delivered to job J's one agent process, pid 10; its trace id."""
    reg.register(RegisteredProcess(pid=10, job_id="J", protocol=PROTOCOL_AGENT, session_id="s10"))
    reg.set_connected(10, "s10", True)
    r = manager.start(TraceSpec(job_id="J", iterations=3, trace_id=trace_id))
    manager.agent_delivered(10, r.trace_id)
    return r.trace_id


def test_dynod_keeps_the_agents_waiting_note_through_a_cancel(tm, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _clock, _alive, reg, manager = tm
    trace_id = _delivered(reg, manager, "wa")
    manager.agent_report(10, trace_id, TraceState.DELIVERED, "no optimizer step in 31 s: ...")
    (p,) = manager.get(trace_id).processes
    assert (p.state, p.waiting) == (TraceState.DELIVERED, "no optimizer step in 31 s: ...")
    assert process_trace_to_pb(p).waiting == "no optimizer step in 31 s: ..."
    manager.agent_report(10, trace_id, TraceState.RUNNING)  # recording: the note no longer holds
    (p,) = manager.get(trace_id).processes
    assert (p.state, p.waiting) == (TraceState.RUNNING, "")
    manager.agent_report(10, trace_id, TraceState.RUNNING, "recorded 1 of 3 optimizer steps; no optimizer step")
    (p,) = manager.cancel(trace_id).processes
    assert p.state == TraceState.CANCELLED and p.waiting.startswith("recorded 1 of 3")
    # kept in the record of the finished trace, read back after a restart
    view = tj.load_record(manager.trace_dir, trace_id)
    assert view is not None and view.processes[0].waiting.startswith("recorded 1 of 3")


def test_a_done_trace_has_no_waiting_note(tm, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _clock, _alive, reg, manager = tm
    trace_id = _delivered(reg, manager, "wd")
    manager.agent_report(10, trace_id, TraceState.RUNNING, "recorded 1 of 3 optimizer steps; ...")
    (p,) = manager.get(trace_id).processes
    Path(p.path).write_text("{}")
    manager.agent_report(10, trace_id, TraceState.DONE)
    (p,) = manager.get(trace_id).processes
    assert (p.state, p.waiting) == (TraceState.DONE, "")


def test_agent_deadline_reason_says_what_it_waited_for(tm) -> None:  # type: ignore[no-untyped-def]
    clock, _alive, reg, manager = tm
    trace_id = _delivered(reg, manager, "wt")
    manager.agent_report(10, trace_id, TraceState.DELIVERED, "no optimizer step for 590 s (...)")
    clock.ms += 601_000
    manager.housekeeping()
    (p,) = manager.get(trace_id).processes
    assert p.state == TraceState.TIMED_OUT
    assert p.error == "no complete trace file by the deadline: no optimizer step for 590 s (...)"


# -- dynod: libkineto processes ---------------------------------------------------------------------------------


def _poll(manager: TraceManager, mask: int) -> str | None:
    return manager.kineto_poll(KinetoPoll(pid=300, ancestry=(), job_id="7", type_mask=mask, uid=os.getuid()))


def _polls_every_5_s(manager: TraceManager, clock: Clock, mask: int, times: int) -> None:
    """libkineto's next `times` polls (asking `mask`), 5 s apart, each followed by dynod's housekeeping pass."""
    for _ in range(times):
        clock.ms += 5000
        _poll(manager, mask)
        manager.housekeeping()


def test_kineto_iteration_trace_that_never_starts_says_so_and_times_out_with_advice(tm) -> None:  # type: ignore[no-untyped-def]
    clock, _alive, _reg, manager = tm
    _poll(manager, 3)
    r = manager.start(TraceSpec(job_id="7", iterations=3, start_iteration_roundup=10, trace_id="kn"))
    assert _poll(manager, 3)  # picked up
    _polls_every_5_s(manager, clock, 3, 12)  # still asking for a config: libkineto has not started recording
    (p,) = manager.get(r.trace_id).processes
    assert p.state == TraceState.DELIVERED
    assert p.waiting.startswith("libkineto picked the request up 60 s ago, and at its last poll (0 s ago) it had not")
    assert "multiple of 10" in p.waiting and "--duration-ms" in p.waiting
    clock.ms += 541_000  # past dynod's deadline (600 s after the pickup); its last poll 1 s before
    _poll(manager, 3)
    clock.ms += 1000
    manager.housekeeping()
    (p,) = manager.get(r.trace_id).processes
    assert p.state == TraceState.TIMED_OUT
    assert p.error.startswith("no complete trace file by the deadline, 602 s after the pickup: libkineto picked")
    assert "at its last poll (1 s ago) it had not started recording" in p.error
    assert "was alive (it polled), but did not make the optimizer steps in that time" in p.error
    assert "--duration-ms" in p.error


def test_kineto_trace_recording_then_exiting_fails_at_once_saying_so(tm) -> None:  # type: ignore[no-untyped-def]
    clock, alive, _reg, manager = tm
    _poll(manager, 3)
    r = manager.start(TraceSpec(job_id="7", iterations=5, start_iteration_roundup=1, trace_id="kx"))
    assert _poll(manager, 3)
    clock.ms += 5000
    _poll(manager, 1)  # no longer asking for a config: recording
    _polls_every_5_s(manager, clock, 1, 8)  # it polls on, recording, and never finishes its steps
    (p,) = manager.get(r.trace_id).processes
    assert p.state == TraceState.RUNNING
    assert p.waiting.startswith("libkineto picked the request up 45 s ago and has recorded for 40 s without finishing")
    alive.discard(300)
    manager.housekeeping()  # the next pass after the exit
    (p,) = manager.get(r.trace_id).processes
    assert p.state == TraceState.FAILED
    assert p.error.startswith("process exited before the trace finished: libkineto picked the request up 45 s ago")


# -- dyno-cli ---------------------------------------------------------------------------------------------------


def _cancelled_errors(tmp_path: Path, state: int, waiting: str) -> tuple[str, str]:
    fake = serve(lambda _port: RunsUntilCancelled(state, waiting))
    try:
        request = dyno_pb2.TraceRequest(job_id="job1", trace_id="t-wait", iterations=3)
        with Cluster([Host("127.0.0.1", fake.port)], deadline_s=2) as cluster:
            ct = ClusterTrace(cluster, request, tmp_path, wait_s=0.2, poll_s=0.05)
            ct.start()
            ct.follow()
            assert ct.wait(10)
    finally:
        fake.server.stop(0)
    (h,) = ct.snapshot()
    assert {p.state for p in h.processes} == {"cancelled"}
    ((error, waiting),) = {(p.error, p.waiting) for p in h.processes}  # the fake's processes are all alike
    return error, waiting


def test_cli_cancel_at_timeout_says_what_the_process_waited_for(tmp_path: Path) -> None:
    note = "no optimizer step for 45 s (the longest pause between two of its 25 steps so far: 0.1 s): ..."
    error, waiting = _cancelled_errors(tmp_path, dyno_pb2.TRACE_STATE_DELIVERED, note)
    assert error == f"cancelled by dyno-cli (--timeout-s): {note}" and waiting == note


def test_cli_cancel_of_a_recording_trace_without_a_note_says_it_was_still_recording(tmp_path: Path) -> None:
    # a daemon without waiting notes, or an agent stepping as usual (no note): the state says what it was doing
    error, _ = _cancelled_errors(tmp_path, dyno_pb2.TRACE_STATE_RUNNING, "")
    assert error == (
        "cancelled by dyno-cli (--timeout-s): it was recording and had not made its 3 optimizer step(s) yet "
        "(a longer --timeout-s waits)"
    )

"""The step counter and iteration traces: a process that has never stepped its optimizer fails early, saying what to
do; a young process (maybe still compiling) or one that has stepped before waits for the deadline, whose failure
then says how long it has not stepped. The step counter's clock is a hand-set one; the trace runner is the agent's
own (torch loaded, no profiler ever started: no step comes)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from manual_clock import TickingClock

from dyno.client.agent import steps as agent_steps
from dyno.client.agent.spec import AgentTraceSpec, TraceFailed, now_ms
from dyno.client.agent.steps import NO_STEP_S, STALL_FACTOR, STARTUP_S, StepCounter
from dyno.client.agent.trace import run_trace

pytestmark = pytest.mark.unit


def _step(counter: StepCounter) -> None:
    counter._hook(None, (), {})


def test_no_step_ever_stalls_after_the_fixed_bound_with_advice() -> None:
    clock = TickingClock()
    counter = StepCounter(clock)
    clock.t += STARTUP_S  # an old process that has never stepped
    since = counter.now()
    clock.t += NO_STEP_S - 1
    assert counter.stall(since) is None
    clock.t += 2
    why = counter.stall(since)
    assert why is not None
    assert f"no optimizer step in {NO_STEP_S + 1:.0f} s" in why
    assert "has not called optimizer.step()" in why and "--duration-ms" in why


def test_a_young_process_that_has_not_stepped_yet_is_not_given_up_on() -> None:
    clock = TickingClock()
    counter = StepCounter(clock)  # counting began just now: it may still be loading data or compiling
    since = counter.now()
    clock.t += STARTUP_S - 1
    assert counter.stall(since) is None
    assert "has not called optimizer.step()" in counter.idle_reason(since)  # the deadline's failure says so
    clock.t += 2
    assert counter.stall(since) is not None  # now old enough, and no step since the request for NO_STEP_S


def test_a_trainer_seen_stepping_is_never_given_up_on_early() -> None:
    clock = TickingClock()
    counter = StepCounter(clock)
    for i in range(3):  # steps 40 s apart (gradient accumulation, a big model)
        clock.t += 40.0 if i else 0.0
        _step(counter)
    assert counter.longest_gap_s == pytest.approx(40.0)
    since = counter.now()  # the request arrives just after the last step; then an evaluation phase of an hour
    clock.t += NO_STEP_S + 1  # past the fixed bound, not past 3 x 40 s: a pause like those seen
    assert counter.stall(since) is None and counter.idle_reason(since) == ""
    clock.t += STALL_FACTOR * 40.0 - NO_STEP_S  # past 3 x its longest pause: unusual now, said at the deadline
    assert counter.stall(since) is None and "has stopped stepping" in counter.idle_reason(since)
    clock.t += 3600
    assert counter.stall(since) is None  # it waits for the deadline ...
    why = counter.idle_reason(since)  # ... whose failure says how long the trainer has not stepped
    assert "has stopped stepping its optimizer" in why and "3 steps" in why and "40.0 s" in why


def test_iteration_trace_fails_early_when_no_step_comes(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    clock = TickingClock(tick=10.0)  # 10 s pass per clock read: the wait loop reads it every round
    counter = StepCounter(clock)
    clock.t += STARTUP_S  # an old process that has never stepped
    counter._installed = True  # as if torch.optim had been imported (the hook itself is not needed: no step comes)
    spec = AgentTraceSpec(
        trace_id="t-stall",
        output_path=tmp_path / "host_1.pt.trace.json.gz",
        iterations=3,
        start_iteration_roundup=1,
        deadline_ms=now_ms() + 600_000,  # the daemon's 10 minutes
    )
    running = threading.Event()
    with pytest.raises(TraceFailed) as e:
        run_trace(spec, counter, threading.Event(), running.set)
    assert "no optimizer step in" in str(e.value) and "--duration-ms" in str(e.value)
    assert not running.is_set() and counter._plan is None  # nothing started, the plan was dropped
    assert not list(tmp_path.iterdir())  # no file


def test_a_trace_that_runs_out_of_time_mid_way_says_how_many_steps_were_recorded(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("torch")
    clock = TickingClock()
    counter = StepCounter(clock)
    counter._installed = True

    class FakeProfiler:
        def start(self) -> None: ...

        def stop(self) -> None: ...

    monkeypatch.setattr(agent_steps.IterationPlan, "__init__", _plan_init_with(FakeProfiler))
    spec = AgentTraceSpec(
        trace_id="t-mid",
        output_path=tmp_path / "host_1.pt.trace.json.gz",
        iterations=5,
        start_iteration_roundup=1,
        deadline_ms=now_ms() + 1500,
    )

    def on_running() -> None:  # the profiler started at step 1; one more step, then the trainer stops stepping
        _step(counter)
        clock.tick = 10.0

    threading.Timer(0.05, lambda: _step(counter)).start()
    with pytest.raises(TraceFailed) as e:
        run_trace(spec, counter, threading.Event(), on_running)
    assert str(e.value).startswith("only 1 of 5 optimizer steps before the deadline: no optimizer step for"), e.value
    assert "has stopped stepping its optimizer" in str(e.value)


def _plan_init_with(profiler_cls: type):
    original = agent_steps.IterationPlan.__init__

    def init(self, spec, make_profiler) -> None:  # type: ignore[no-untyped-def]
        original(self, spec, profiler_cls)

    return init

"""The agent's profiler: a trace requested while the program runs its own torch profiler fails with that reason (and
leaves the program's session alone); a forked child stops recording; a program's profiler start racing ours is told
apart from ours."""

from __future__ import annotations

import os
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest

from dyno.client.agent.profiler import Profiler, profiler_factory
from dyno.client.agent.spec import AgentTraceSpec, TraceFailed
from dyno.client.agent.trace import StepCounter, TraceResult, run_trace

pytestmark = pytest.mark.unit
torch = pytest.importorskip("torch")

_REASON = "running its own torch profiler"


def _step(model: object, opt: object) -> None:
    loss = model(torch.randn(4, 8)).sum()  # type: ignore[operator]
    opt.zero_grad()  # type: ignore[attr-defined]
    loss.backward()
    opt.step()  # type: ignore[attr-defined]


def test_duration_trace_refused_while_the_programs_profiler_runs(tmp_path: Path) -> None:
    model = torch.nn.Linear(8, 2)
    spec = AgentTraceSpec(trace_id="t-dur", output_path=tmp_path / "a.pt.trace.json.gz", duration_ms=10)
    with torch.profiler.profile() as own:
        model(torch.randn(4, 8))
        with pytest.raises(TraceFailed, match=_REASON):
            run_trace(spec, StepCounter(), threading.Event(), lambda: None)
        model(torch.randn(4, 8))
    assert any(e.name == "aten::addmm" for e in own.events()), "the program's own profile must be intact"
    assert not list(tmp_path.iterdir())


def test_iteration_trace_refused_on_the_training_thread(tmp_path: Path) -> None:
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = StepCounter()
    steps.install()
    spec = AgentTraceSpec(
        trace_id="t-it",
        output_path=tmp_path / "b.pt.trace.json.gz",
        iterations=2,
        deadline_ms=int(time.time() * 1000) + 600_000,
    )
    outcome: list[TraceResult | TraceFailed] = []
    cancel = threading.Event()

    def trace() -> None:
        try:
            outcome.append(run_trace(spec, steps, cancel, lambda: None))
        except TraceFailed as e:
            outcome.append(e)

    t = threading.Thread(target=trace)
    with torch.profiler.profile() as own:
        t.start()
        while steps._plan is None and t.is_alive():  # the agent thread hands the plan over
            time.sleep(0.01)
        while steps._plan is not None:  # the plan ends (refused) at an optimizer step of this thread
            _step(model, opt)
        # A plan that ended without starting must end the wait at once, not at the deadline (10 minutes away).
        t.join(30)
        hung = t.is_alive()
        cancel.set()
        t.join()
    assert not hung, "the agent kept waiting for a trace whose start had failed"
    (result,) = outcome
    assert isinstance(result, TraceFailed) and _REASON in str(result)
    assert any(e.name == "aten::addmm" for e in own.events())
    assert not list(tmp_path.iterdir())


def test_a_profiler_the_program_runs_during_ours_ends_the_trace_without_export(tmp_path: Path) -> None:
    # The program's own torch.profiler.profile inside a running duration trace ended our session; exporting what
    # was left killed the trainer with SIGSEGV. The stop now says so instead, and nothing is exported.
    model = torch.nn.Linear(8, 2)
    spec = AgentTraceSpec(trace_id="t-over", output_path=tmp_path / "c.pt.trace.json.gz", duration_ms=10)
    ours = profiler_factory(spec, all_threads=True)()
    ours.start()
    with torch.profiler.profile() as own:
        model(torch.randn(4, 8))
    with pytest.raises(TraceFailed, match="started its own torch profiler during the trace"):
        ours.stop()
    assert any(e.name == "aten::addmm" for e in own.events())


# A process forked while the agent's trace runs stops recording in the child (it inherited a profiler session
# nothing would stop).


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_child_does_not_keep_recording(tmp_path: Path) -> None:
    spec = AgentTraceSpec(trace_id="t-fork", output_path=tmp_path / "f.pt.trace.json.gz", duration_ms=10)
    ours = profiler_factory(spec, all_threads=True)()
    starter = threading.Thread(target=ours.start)  # as the agent does: on its own thread, for all threads
    starter.start()
    starter.join()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run ops, then see how many the session (if still on) recorded
        code = 1
        try:
            x = torch.randn(3)
            for _ in range(50):
                x = x + 1
            recorded = torch._C._autograd._disable_profiler().events()
            os.write(write_end, str(sum(e.name() == "aten::add" for e in recorded)).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as r:
        recorded_in_child = r.read()
    _, status = os.waitpid(pid, 0)
    torch.randn(3) + 1  # the parent's trace goes on
    ours.stop()
    ours.export_chrome_trace(str(tmp_path / "parent.json"))
    assert os.waitstatus_to_exitcode(status) == 0
    assert recorded_in_child == "0", f"the forked child recorded {recorded_in_child} ops"
    assert "aten::add" in (tmp_path / "parent.json").read_text()


# A profiler the program starts while ours is starting is told apart from ours (a fake torch makes the timing exact).


def _fake_torch(program_starts_during_enter: int) -> tuple[Any, list[str]]:
    calls: list[str] = []
    profiler = types.SimpleNamespace(_is_profiler_enabled=False)

    def run_on_profiler_start() -> None:
        profiler._is_profiler_enabled = True

    class Profile:
        def __init__(self, **kwargs: Any) -> None:
            pass

        def __enter__(self) -> Profile:
            profiler._run_on_profiler_start()  # looked up at call time, as torch does
            for _ in range(program_starts_during_enter):  # the program's thread, while kineto is being enabled
                profiler._run_on_profiler_start()
            calls.append("enter")
            return self

        def __exit__(self, *exc: object) -> None:
            calls.append("exit")

    profiler._run_on_profiler_start = run_on_profiler_start
    profiler.profile = Profile
    torch = types.SimpleNamespace(
        autograd=types.SimpleNamespace(profiler=profiler, _add_metadata_json=lambda *a: None),
        cuda=types.SimpleNamespace(is_available=lambda: False),
    )
    return torch, calls


def _spec(tmp_path: Path) -> AgentTraceSpec:
    return AgentTraceSpec(trace_id="t-race", output_path=tmp_path / "a.pt.trace.json.gz", duration_ms=10)


def test_a_program_start_during_our_enter_is_a_takeover(tmp_path: Path) -> None:
    torch, calls = _fake_torch(program_starts_during_enter=1)
    prof = Profiler(torch, _spec(tmp_path), all_threads=False)
    prof.start()
    with pytest.raises(TraceFailed, match="started its own torch profiler"):
        prof.stop()
    assert calls == ["enter"]  # the program's session is not stopped


def test_our_start_alone_is_no_takeover(tmp_path: Path) -> None:
    torch, calls = _fake_torch(program_starts_during_enter=0)
    prof = Profiler(torch, _spec(tmp_path), all_threads=False)
    prof.start()
    prof.stop()
    assert calls == ["enter", "exit"]

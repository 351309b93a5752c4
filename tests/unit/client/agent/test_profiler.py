"""A trace requested while the program runs its own torch profiler fails with that reason instead of starting a
second profiler, which took the program's session over (its own results came out empty)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from dyno.client.agent.profiler import profiler_factory
from dyno.client.agent.trace import StepCounter, TraceFailed, TraceResult, TraceSpec, run_trace

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
    spec = TraceSpec(trace_id="t-dur", output_path=tmp_path / "a.pt.trace.json.gz", duration_ms=10)
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
    spec = TraceSpec(
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
    spec = TraceSpec(trace_id="t-over", output_path=tmp_path / "c.pt.trace.json.gz", duration_ms=10)
    ours = profiler_factory(spec, all_threads=True)()
    ours.start()
    with torch.profiler.profile() as own:
        model(torch.randn(4, 8))
    with pytest.raises(TraceFailed, match="started its own torch profiler during the trace"):
        ours.stop()
    assert any(e.name == "aten::addmm" for e in own.events())

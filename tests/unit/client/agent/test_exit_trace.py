"""A trace running when the program exits normally: what was recorded is written and reported done with a note
(agent.finish_at_exit, run in atexit); a trace not recording yet is cancelled; an exit that waits past the cap
reports the trace failed. The runner parts use real CPU torch; the agent parts a stand-in daemon stub."""

from __future__ import annotations

import gzip
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fake_run_trace import FakeRun, install_run_trace

from dyno.client import agent as agent_mod
from dyno.client.agent.trace import AgentTraceSpec, StepCounter, TraceFailed, TraceResult, run_trace
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


class FakeStub:
    def __init__(self) -> None:
        self.reports: list[tuple[str, str, str]] = []

    def ReportTrace(self, request: Any, timeout: float) -> None:  # noqa: N802 - the stub's name
        self.reports.append((request.trace_id, dyno_pb2.TraceState.Name(request.state)[12:], request.error))


def _agent(tmp_path: Path) -> tuple[agent_mod.Agent, FakeStub]:
    a = agent_mod.Agent(job_id="j1", socket_path=tmp_path / "agent.sock")
    stub = FakeStub()
    a._conn._stub = stub
    return a, stub


def _run_in_thread(a: agent_mod.Agent, spec: AgentTraceSpec) -> threading.Thread:
    a._submit(spec)
    t = threading.Thread(target=a._run_one, args=(a._queue.get_nowait(),), daemon=True)
    t.start()
    return t


def _wait(predicate: Any, timeout_s: float = 30.0) -> None:
    until = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < until, "timed out"
        time.sleep(0.01)


def _load(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def test_duration_trace_recording_at_exit_is_written_with_a_note(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    spec = AgentTraceSpec(trace_id="t1", output_path=tmp_path / "t1.pt.trace.json.gz", duration_ms=60_000)
    running, cancel, exiting = threading.Event(), threading.Event(), threading.Event()
    out: list[Any] = []

    def runner() -> None:
        try:
            out.append(run_trace(spec, StepCounter(), cancel, running.set, exiting))
        except TraceFailed as e:
            out.append(e)

    t = threading.Thread(target=runner, daemon=True)
    t.start()
    assert running.wait(30)
    for _ in range(20):
        torch.mm(torch.randn(16, 16), torch.randn(16, 16))
    exiting.set()
    cancel.set()
    t.join(60)
    (result,) = out
    assert isinstance(result, TraceResult), result
    assert result.note.startswith("ended early: the program exited after ") and "of the requested 60 s" in result.note
    doc = _load(result.path)
    assert doc["trace_id"] == "t1"
    assert any(e.get("cat") == "cpu_op" and e.get("name") == "aten::mm" for e in doc["traceEvents"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t1.pt.trace.json.gz"]  # no temp files left


def test_trace_not_recording_yet_at_exit_is_cancelled(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    spec = AgentTraceSpec(
        trace_id="t2",
        output_path=tmp_path / "t2.json",
        duration_ms=1000,
        start_time_ms=int(time.time() * 1000) + 60_000,
    )
    cancel, exiting = threading.Event(), threading.Event()
    exiting.set()
    cancel.set()
    with pytest.raises(TraceFailed, match="^cancelled$"):
        run_trace(spec, StepCounter(), cancel, lambda: pytest.fail("must not start recording"), exiting)
    assert not list(tmp_path.iterdir())


def test_iteration_trace_stopped_at_exit_on_the_training_thread(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    steps = StepCounter()
    steps.install()
    model = torch.nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    spec = AgentTraceSpec(trace_id="t3", output_path=tmp_path / "t3.json", iterations=10)
    running, cancel = threading.Event(), threading.Event()
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(run_trace(spec, steps, cancel, running.set)), daemon=True)
    t.start()
    _wait(lambda: steps._plan is not None)
    for _ in range(3):  # the first step starts the profiler, two more are recorded
        model(torch.randn(2, 8)).sum().backward()
        opt.step()
    assert running.wait(30)
    assert steps.finish_early()  # this (the training) thread stops its own profiler
    t.join(60)
    (result,) = out
    assert "after 2 optimizer step(s) of the requested 10" in result.note
    events = _load(result.path)["traceEvents"]
    assert len([e for e in events if str(e.get("name", "")).startswith("Optimizer.step#SGD.step")]) == 2


def test_finish_early_leaves_another_threads_profiler_alone(tmp_path: Path) -> None:
    steps = StepCounter()
    plan = type("Plan", (), {"profiler": object(), "cancelled": False, "thread": -1})()
    steps._plan = plan  # type: ignore[assignment]
    assert not steps.finish_early() and steps._plan is plan


def test_agent_reports_done_with_the_note(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    recording = threading.Event()

    def fake_run_trace(run: FakeRun) -> TraceResult:
        run.on_running()
        recording.set()
        run.cancel.wait(30)
        assert run.exiting is not None and run.exiting.is_set()
        run.spec.output_path.write_bytes(b"{}")
        return TraceResult(run.spec.output_path, 2, note="ended early: ...")

    install_run_trace(monkeypatch, fake_run_trace)
    monkeypatch.setattr(agent_mod.atexit, "register", lambda f: None)
    a, stub = _agent(tmp_path)
    t = _run_in_thread(a, AgentTraceSpec(trace_id="t4", output_path=tmp_path / "t4.json", duration_ms=60_000))
    assert recording.wait(30)
    a.finish_at_exit(timeout_s=30)
    t.join(30)
    assert stub.reports == [("t4", "RUNNING", ""), ("t4", "DONE", "ended early: ...")]


def test_agent_exit_past_the_cap_reports_failed_and_leaves_no_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    recording, release = threading.Event(), threading.Event()

    def slow_export(run: FakeRun) -> TraceResult:
        run.on_running()
        recording.set()
        run.cancel.wait(30)
        release.wait(30)  # an export that outlasts the cap
        run.spec.output_path.write_bytes(b"{}")
        return TraceResult(run.spec.output_path, 2, note="ended early: ...")

    install_run_trace(monkeypatch, slow_export)
    monkeypatch.setattr(agent_mod.atexit, "register", lambda f: None)
    a, stub = _agent(tmp_path)
    spec = AgentTraceSpec(trace_id="t5", output_path=tmp_path / "t5.json", duration_ms=60_000)
    t = _run_in_thread(a, spec)
    assert recording.wait(30)
    a.finish_at_exit(timeout_s=0.2)
    assert stub.reports[-1][:2] == ("t5", "FAILED")
    assert "took longer than 0.2 s" in stub.reports[-1][2]
    release.set()
    t.join(30)
    assert [r[1] for r in stub.reports] == ["RUNNING", "FAILED"]  # no DONE after the failure
    assert not spec.output_path.exists()


def test_agent_exit_with_a_pending_trace_changes_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    started = threading.Event()
    seen: list[str] = []

    def pending(run: FakeRun) -> TraceResult:
        started.set()
        run.cancel.wait(30)  # waiting for its start time: never recording
        assert run.exiting is not None
        seen.append(f"cancel={run.cancel.is_set()} exiting={run.exiting.is_set()}")
        raise TraceFailed("cancelled")

    install_run_trace(monkeypatch, pending)
    a, stub = _agent(tmp_path)
    t = _run_in_thread(a, AgentTraceSpec(trace_id="t6", output_path=tmp_path / "t6.json", duration_ms=1000))
    assert started.wait(30)
    a.finish_at_exit(timeout_s=5)  # nothing recording: left to stop()
    assert stub.reports == [] and t.is_alive()
    a.stop(timeout_s=5)  # as before: the trace is cancelled
    t.join(30)
    assert seen == ["cancel=True exiting=False"]

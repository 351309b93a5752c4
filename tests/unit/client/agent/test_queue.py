"""The agent's one-trace-at-a-time rule: a request that arrives while a trace runs is refused as busy, but one
that arrives the moment the previous trace's final report lands is taken (no real torch or daemon needed: the
trace runner and the daemon's stub are stand-ins; the queueing code is the agent's own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_run_trace import FakeRun, install_run_trace

from dyno.client import agent as agent_mod
from dyno.client.agent.trace import AgentTraceSpec, TraceResult
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


class FakeDaemon:
    """ReportTrace records every report; when a trace is reported final, the daemon at once hands the agent its
    next request, as dynod does for back-to-back traces."""

    def __init__(self) -> None:
        self.reports: list[tuple[str, str, str]] = []
        self.agent: agent_mod.Agent | None = None
        self.next_spec: AgentTraceSpec | None = None

    def ReportTrace(self, request: Any, timeout: float) -> None:  # noqa: N802 - the stub's name
        state = dyno_pb2.TraceState.Name(request.state).removeprefix("TRACE_STATE_")
        self.reports.append((request.trace_id, state, request.error))
        if state in ("DONE", "FAILED") and self.next_spec is not None and self.agent is not None:
            spec, self.next_spec = self.next_spec, None
            self.agent._submit(spec)


@pytest.fixture
def setup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[agent_mod.Agent, FakeDaemon]:
    def fake_run_trace(run: FakeRun) -> TraceResult:
        run.on_running()
        run.spec.output_path.write_bytes(b"{}")
        return TraceResult(run.spec.output_path, 2)

    install_run_trace(monkeypatch, fake_run_trace)
    a = agent_mod.Agent(job_id="j1", socket_path=tmp_path / "agent.sock")
    daemon = FakeDaemon()
    daemon.agent = a
    a._conn._stub = daemon
    return a, daemon


def _spec(tmp_path: Path, trace_id: str) -> AgentTraceSpec:
    return AgentTraceSpec(trace_id=trace_id, output_path=tmp_path / f"{trace_id}.json", duration_ms=10)


def test_request_arriving_with_the_final_report_is_taken(setup, tmp_path: Path) -> None:
    a, daemon = setup
    a._submit(_spec(tmp_path, "t1"))
    daemon.next_spec = _spec(tmp_path, "t2")
    a._run_one(a._queue.get_nowait())
    assert ("t1", "DONE", "") in daemon.reports
    assert not [r for r in daemon.reports if r[1] == "FAILED"], daemon.reports
    second = a._queue.get_nowait()
    assert second.trace_id == "t2"
    a._run_one(second)
    assert daemon.reports[-1] == ("t2", "DONE", "") and a._traces == {}


def test_request_during_a_running_trace_is_refused_as_busy(setup, tmp_path: Path) -> None:
    a, daemon = setup
    a._submit(_spec(tmp_path, "t1"))
    a._submit(_spec(tmp_path, "t2"))
    assert daemon.reports == [("t2", "FAILED", "busy: trace t1 is still running in this process")]
    a._run_one(a._queue.get_nowait())
    assert daemon.reports[-1] == ("t1", "DONE", "") and a._queue.empty()

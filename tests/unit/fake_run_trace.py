"""The agent's trace runner (process_agent.run_trace) replaced by a test's body, called with the parts of the call it
uses, for tests of the agent around a trace (reports, exit, the queue) without a profiler."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from dyno.client.agent import process_agent
from dyno.client.agent.output import OutputFiles
from dyno.client.agent.trace import AgentTraceSpec, TraceResult

__all__ = ["FakeRun", "install_run_trace"]


@dataclass(frozen=True)
class FakeRun:
    """One call of the runner: what to trace, the agent's cancel and exiting events, its on_running callback, and the
    trace's output files (None when the agent gave none)."""

    spec: AgentTraceSpec
    cancel: threading.Event
    on_running: Callable[[], None]
    exiting: threading.Event | None
    files: OutputFiles | None


def install_run_trace(monkeypatch: pytest.MonkeyPatch, body: Callable[[FakeRun], TraceResult]) -> None:
    """Every trace the agent runs calls `body` instead of the real runner (run_trace's signature kept)."""

    def run_trace(
        spec: AgentTraceSpec,
        steps: Any,
        cancel: threading.Event,
        on_running: Callable[[], None],
        exiting: threading.Event | None = None,
        files: OutputFiles | None = None,
        on_waiting: Any = None,
    ) -> TraceResult:
        return body(FakeRun(spec, cancel, on_running, exiting, files))

    monkeypatch.setattr(process_agent, "run_trace", run_trace)

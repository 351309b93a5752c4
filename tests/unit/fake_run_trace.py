"""The agent's trace runner (process_agent.run_trace) replaced by a test's body, called with the parts of the call it
uses, for tests of the agent around a trace (reports, exit, the queue) without a profiler."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from dyno.client.agent import process_agent, trace
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
    """Every trace the agent runs calls `body` instead of the real runner; the call's arguments are bound to the real
    runner's signature, so a call it would not accept fails here too."""
    signature = inspect.signature(trace.run_trace)

    def run_trace(*args: Any, **kwargs: Any) -> TraceResult:
        call = signature.bind(*args, **kwargs)
        call.apply_defaults()
        a = call.arguments
        return body(FakeRun(a["spec"], a["cancel"], a["on_running"], a["exiting"], a["files"]))

    monkeypatch.setattr(process_agent, "run_trace", run_trace)

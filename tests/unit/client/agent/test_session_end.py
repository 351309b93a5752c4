"""The agent when its stream to dynod ends (a daemon restart): a trace that is recording goes on, the others are
cancelled; a final report that found no daemon is sent again after the next registration. Stand-ins for the
daemon's stub; the agent's and the connection's code is the real one."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import grpc
import pytest

from dyno.client import agent as agent_mod
from dyno.client.agent.trace import AgentTraceSpec
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


class Unavailable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE


class NotFound(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.NOT_FOUND


class Stub:
    def __init__(self, fail: type[Exception] | None = None) -> None:
        self.fail = fail
        self.reports: list[tuple[str, str]] = []

    def ReportTrace(self, request: Any, timeout: float) -> None:  # noqa: N802 - the stub's name
        if self.fail is not None:
            raise self.fail()
        self.reports.append((request.trace_id, dyno_pb2.TraceState.Name(request.state).removeprefix("TRACE_STATE_")))


def _agent(tmp_path: Path) -> agent_mod.Agent:
    return agent_mod.Agent(job_id="j1", socket_path=tmp_path / "agent.sock")


def test_session_end_keeps_the_recording_trace_and_cancels_the_others(tmp_path: Path) -> None:
    a = _agent(tmp_path)
    recording, waiting = threading.Event(), threading.Event()
    a._traces = {"rec": recording, "wait": waiting}
    a._recording = AgentTraceSpec(trace_id="rec", output_path=tmp_path / "f", duration_ms=1000)
    a._session_ended()
    assert not recording.is_set() and waiting.is_set()
    a._recording = None  # nothing records: every trace is cancelled, as before
    a._session_ended()
    assert recording.is_set()


def test_final_reports_that_found_no_daemon_are_sent_after_registering_again(tmp_path: Path) -> None:
    conn = _agent(tmp_path)._conn
    conn.report("t0", "RUNNING")  # not connected: lost (the daemon's timeouts cover it), not kept
    conn.report("t1", "DONE", path="/x", size_bytes=5)  # not connected
    conn._stub = Stub(fail=Unavailable)  # the daemon is going down
    conn.report("t2", "FAILED", error="cancelled")
    conn._stub = up = Stub()
    conn.report("t3", "DONE")  # delivered at once
    conn._send_unsent()  # what _session does after a registration
    assert up.reports == [("t3", "DONE"), ("t1", "DONE"), ("t2", "FAILED")]
    conn._stub = answers = Stub(fail=NotFound)  # a daemon that answered: not sent again
    conn.report("t4", "DONE")
    conn._stub = up
    conn._send_unsent()
    assert up.reports[-1] == ("t2", "FAILED") and not conn._unsent and answers.reports == []


def test_unsent_reports_are_bounded(tmp_path: Path) -> None:
    conn = _agent(tmp_path)._conn
    for i in range(100):
        conn.report(f"t{i}", "FAILED")
    conn._stub = up = Stub()
    conn._send_unsent()
    assert len(up.reports) == 16 and up.reports[-1] == ("t99", "FAILED")

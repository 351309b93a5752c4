"""ReportTrace is bound to the registration: the agent socket is 0666 and grpc says nothing about who calls, so a
report is believed only with the session the pid's Register answered (a secret of its agent), so a local user who
knows a trace id and a pid (both listed by ListProcesses / GetTrace) cannot mark another user's part FAILED.

Real Agent servers on a Unix socket; the agent side is the real DaemonConnection."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from agent_service_env import agent_service

from dyno.client.agent.connection import DaemonConnection
from dyno.client.agent.env import AgentIdentity
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import TraceSpec, TraceState
from dyno.v1 import agent_pb2, agent_pb2_grpc, dyno_pb2

from conftest import wait_for

pytestmark = pytest.mark.unit

ME = os.getpid()


@dataclass
class Env:
    tm: TraceManager
    reg: ProcessRegistry
    stub: agent_pb2_grpc.AgentStub
    socket: Path


@pytest.fixture
def env() -> Iterator[Env]:
    with agent_service(ProcessRegistry(), "dyno-secses-", "hostS") as s:
        yield Env(s.manager, s.registry, s.stub, s.server.path)


class Agent:
    """A registered agent with its Watch stream consumed on a thread (the trace requests it receives)."""

    def __init__(self, env: Env, *, with_session: bool = True) -> None:
        resp = env.stub.Register(
            agent_pb2.RegisterRequest(pid=ME, job_id="victim", reports_with_session=with_session), timeout=5
        )
        self.session = resp.session_id
        self.call = env.stub.Watch(agent_pb2.WatchRequest(pid=ME, session_id=self.session))
        self.traces: list[str] = []
        threading.Thread(target=self._run, daemon=True).start()
        wait_for(lambda: (rec := env.reg.get(ME)) is not None and rec.connected)

    def _run(self) -> None:
        try:
            for cmd in self.call:
                if cmd.WhichOneof("kind") == "trace":
                    self.traces.append(cmd.trace.trace_id)
        except grpc.RpcError:
            pass


def _report(env: Env, trace_id: str, state: int, session: str | None, pid: int = ME) -> grpc.StatusCode:
    request = agent_pb2.ReportTraceRequest(pid=pid, trace_id=trace_id, state=state, error="forged")  # type: ignore[arg-type]
    if session is not None:
        request.session_id = session
    try:
        env.stub.ReportTrace(request, timeout=5)
    except grpc.RpcError as e:
        assert "Traceback" not in (e.details() or "")
        return e.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def _state(env: Env, trace_id: str) -> TraceState:
    (proc,) = env.tm.get(trace_id).processes
    return proc.state


def test_a_report_without_the_registrations_session_is_refused(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    agent = Agent(env)
    trace_id = env.tm.start(TraceSpec(job_id="victim", duration_ms=60_000)).trace_id
    wait_for(lambda: agent.traces)
    with caplog.at_level(logging.WARNING, logger="dyno.daemon.agent_service"):
        for session in (None, "", "0" * 32, agent.session[:-1]):  # another local user, guessing
            for state in (dyno_pb2.TRACE_STATE_FAILED, dyno_pb2.TRACE_STATE_DONE, dyno_pb2.TRACE_STATE_RUNNING):
                assert _report(env, trace_id, state, session) == grpc.StatusCode.PERMISSION_DENIED
    assert _state(env, trace_id) == TraceState.DELIVERED  # untouched
    refusals = [r for r in caplog.records if "ReportTrace" in r.getMessage()]
    assert len(refusals) == 1 and refusals[0].levelno == logging.WARNING and not refusals[0].exc_info
    assert f"pid {ME}" in refusals[0].getMessage()
    # the agent's own report, with its session, is believed
    assert _report(env, trace_id, dyno_pb2.TRACE_STATE_RUNNING, agent.session) == grpc.StatusCode.OK
    assert _state(env, trace_id) == TraceState.RUNNING
    assert _report(env, trace_id, dyno_pb2.TRACE_STATE_FAILED, agent.session) == grpc.StatusCode.OK
    assert _state(env, trace_id) == TraceState.FAILED
    agent.call.cancel()


def test_an_unregistered_pid_or_a_kineto_process_takes_no_agent_report(env: Env) -> None:
    """A libkineto process has no session (its registration is the kernel's pid of its datagrams): no ReportTrace
    names it; nor one that is not registered at all."""
    env.tm.kineto_poll(KinetoPoll(pid=ME, ancestry=(), job_id="7", type_mask=3, uid=os.geteuid()))
    trace_id = env.tm.start(TraceSpec(job_id="7", duration_ms=60_000)).trace_id
    for session in (None, "x"):
        assert _report(env, trace_id, dyno_pb2.TRACE_STATE_FAILED, session) == grpc.StatusCode.PERMISSION_DENIED
    assert _state(env, trace_id) != TraceState.FAILED
    assert _report(env, trace_id, dyno_pb2.TRACE_STATE_FAILED, None, pid=ME + 100_000) in (
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.NOT_FOUND,
    )


def test_an_older_agent_without_sessions_still_reports_but_a_wrong_session_is_refused(env: Env) -> None:
    """An agent from before sessions never says reports_with_session and sends none: its reports are believed as
    before (its exposure is what it was); a session it did not get is refused all the same."""
    agent = Agent(env, with_session=False)
    trace_id = env.tm.start(TraceSpec(job_id="victim", duration_ms=60_000)).trace_id
    wait_for(lambda: agent.traces)
    assert _report(env, trace_id, dyno_pb2.TRACE_STATE_RUNNING, "0" * 32) == grpc.StatusCode.PERMISSION_DENIED
    assert _report(env, trace_id, dyno_pb2.TRACE_STATE_RUNNING, None) == grpc.StatusCode.OK
    assert _state(env, trace_id) == TraceState.RUNNING
    agent.call.cancel()


def test_the_real_agent_connection_reports_with_its_session(env: Env) -> None:
    """DaemonConnection registers saying it sends its session, and does: its reports are believed, others' not."""
    stopping = threading.Event()
    traces: list[str] = []

    def on_command(cmd: Any) -> None:
        if cmd.WhichOneof("kind") == "trace":
            traces.append(cmd.trace.trace_id)

    ident = AgentIdentity(
        pid=ME, ancestry=(), job_id="victim", rank=None, local_rank=None, world_size=None, gpu=-1, hostname="h",
        cmdline="train.py",
    )  # fmt: skip
    conn = DaemonConnection(env.socket, lambda: ident, on_command, stopping)
    thread = threading.Thread(target=conn.run, daemon=True)
    thread.start()
    try:
        assert conn.registered.wait(10)
        trace_id = env.tm.start(TraceSpec(job_id="victim", duration_ms=60_000)).trace_id
        wait_for(lambda: traces)
        assert _report(env, trace_id, dyno_pb2.TRACE_STATE_FAILED, None) == grpc.StatusCode.PERMISSION_DENIED
        conn.report(trace_id, "RUNNING")
        assert _state(env, trace_id) == TraceState.RUNNING
        conn.report(trace_id, "FAILED", error="the agent's own failure")
        (proc,) = env.tm.get(trace_id).processes
        assert proc.state == TraceState.FAILED and proc.error == "the agent's own failure"
    finally:
        stopping.set()
        conn.cancel()
        thread.join(10)


class _Refusing:
    """A daemon's stub that no longer knows the session (its end of the stream ended before the agent's did)."""

    def __init__(self, code: grpc.StatusCode) -> None:
        self.code, self.sent = code, []  # type: ignore[var-annotated]

    def ReportTrace(self, request: Any, timeout: float) -> None:  # noqa: N802 - the stub's name
        self.sent.append((request.trace_id, request.session_id))
        if self.code != grpc.StatusCode.OK:
            raise _Error(self.code)


class _Error(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code


def test_a_final_report_refused_for_its_session_is_sent_again_with_the_next_registrations(tmp_path: Path) -> None:
    ident = AgentIdentity(ME, (), "j", None, None, None, -1, "h", "")
    conn = DaemonConnection(tmp_path / "agent.sock", lambda: ident, lambda cmd: None, threading.Event())
    conn._stub, conn.session_id = _Refusing(grpc.StatusCode.PERMISSION_DENIED), "old"
    conn.report("t1", "DONE", path="/x")
    conn.report("t2", "RUNNING")  # not final: not kept
    up = _Refusing(grpc.StatusCode.OK)
    conn._stub, conn.session_id = up, "new"
    conn._send_unsent()  # what a registration does
    assert up.sent == [("t1", "new")]

"""The agent's connection: a refused registration is logged as refused, with the daemon's reason; a final report
refused on an old channel is kept and sent again after registering anew."""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from dyno.client.agent import Agent
from dyno.client.agent.connection import DaemonConnection
from dyno.client.agent.env import AgentIdentity
from dyno.client.agent.output import OutputFiles
from dyno.daemon.agent_server import AgentServer
from dyno.daemon.agent_service import AgentServicer
from dyno.daemon.config import DaemonConfig
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.agent_side import GONE_REASON, REVIVED_NOTE
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.subsystem import Tracing
from dyno.daemon.tracing.values import TraceSpec, TraceState
from dyno.v1 import agent_pb2, agent_pb2_grpc

from conftest import short_tmpdir, wait_for

pytestmark = pytest.mark.unit


# What dynod answers: a field it refuses, or its registry caps (registry.RegistryFullError).
REFUSALS = {
    grpc.StatusCode.INVALID_ARGUMENT: "job_id/cmdline/hostname: too long",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "3 processes of uid 1000 are registered with this daemon, the limit per user",
}


class RefusingAgentService(agent_pb2_grpc.AgentServicer):
    def __init__(self, code: grpc.StatusCode) -> None:
        self.registers = threading.Event()
        self.code = code

    def Register(self, request, context):  # noqa: N802 - grpc method name
        self.registers.set()
        context.abort(self.code, REFUSALS[self.code])


@pytest.fixture(params=list(REFUSALS))
def refusing_socket(request: pytest.FixtureRequest) -> Iterator[tuple[Path, RefusingAgentService]]:
    sock = short_tmpdir("dyno-e2a-") / "agent.sock"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    service = RefusingAgentService(request.param)
    agent_pb2_grpc.add_AgentServicer_to_server(service, server)
    server.add_insecure_port(f"unix:{sock}")
    server.start()
    yield sock, service
    server.stop(0)
    sock.unlink(missing_ok=True)
    sock.parent.rmdir()


def test_a_refused_registration_is_reported_with_the_daemons_reason(
    refusing_socket: tuple[Path, RefusingAgentService], caplog: pytest.LogCaptureFixture
) -> None:
    sock, service = refusing_socket
    caplog.set_level(logging.WARNING, logger="dyno.client")
    agent = Agent("x" * 200, sock, min_backoff_s=5, max_backoff_s=5).start()
    try:
        assert service.registers.wait(10)
        deadline = threading.Event()
        for _ in range(100):  # the warning is logged right after the refused call returns
            if caplog.records:
                break
            deadline.wait(0.05)
    finally:
        agent.stop()
    messages = [r.getMessage() for r in caplog.records]
    assert messages, "nothing logged"
    assert f"the dyno daemon at unix:{sock} refused to register this process" in messages[0]
    assert REFUSALS[service.code] in messages[0] and "no dyno daemon" not in messages[0]
    assert not agent.registered


@pytest.mark.parametrize("job_id", ["bad\njob", "tab\there", "x" * 129])
def test_daemon_refuses_job_ids_that_no_trace_request_could_name(job_id: str) -> None:
    """StartTrace accepts only job ids of at most 128 printable characters; a process registered under another one
    could never be traced (and a newline breaks `dyno-cli ps`'s table), so Register refuses it naming the field."""
    d = short_tmpdir("dyno-e2j-")
    cfg = DaemonConfig(
        trace_dir=d / "traces", agent_socket=d / "agent.sock", kineto_endpoint="off", state_dir=d / "state"
    )
    tracing = Tracing(cfg, "hostJ")
    tracing.start()
    channel = grpc.insecure_channel(f"unix:{cfg.agent_socket_path}")
    try:
        stub = agent_pb2_grpc.AgentStub(channel)
        with pytest.raises(grpc.RpcError) as e:
            stub.Register(agent_pb2.RegisterRequest(pid=4242, job_id=job_id, gpu=-1), timeout=5)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and e.value.details().startswith("job_id: ")
        assert len(tracing.registry) == 0
    finally:
        channel.close()
        tracing.stop()
        shutil.rmtree(d, ignore_errors=True)


# A final report refused on the old channel (no session after the daemon ended the registration) is kept and sent
# again with the new session, and the trace ends done. Real AgentServicer on a Unix socket, the real
# DaemonConnection.


ME = os.getpid()


def test_a_done_report_refused_after_dynod_ended_the_registration_revives_the_trace_once_registered_again() -> None:
    d = short_tmpdir("dyno-rvw-")
    reg = ProcessRegistry()
    tm = TraceManager(reg, d / "traces", "hostR")
    server = AgentServer(AgentServicer(tm, reg, keepalive_ms=200), d / "agent.sock")
    server.start()
    traces: list[Any] = []
    stopping = threading.Event()
    ident = AgentIdentity(ME, (), "jobR", None, None, None, -1, "h", "train.py")
    conn = DaemonConnection(
        server.path,
        lambda: ident,
        lambda cmd: traces.append(cmd.trace) if cmd.WhichOneof("kind") == "trace" else None,
        stopping,
        min_backoff_s=0.05,
        max_backoff_s=0.1,
    )
    thread = threading.Thread(target=conn.run, daemon=True)
    thread.start()
    try:
        assert conn.registered.wait(10)
        trace_id = tm.start(TraceSpec(job_id="jobR", duration_ms=60_000)).trace_id
        wait_for(lambda: traces)
        conn.report(trace_id, "RUNNING")
        first = conn.session_id
        reg.remove(ME, GONE_REASON, session_id=first)  # dynod's end of the stream ended first
        (p,) = tm.get(trace_id).processes
        assert p.state == TraceState.FAILED
        files = OutputFiles(Path(traces[0].output_path))
        files.output.write_bytes(b"\x1f\x8b" + bytes(100))  # the agent finishes its trace
        conn.report(trace_id, "DONE", path=str(files.output), size_bytes=102)  # refused: no session any more
        wait_for(lambda: conn.registrations >= 2 and conn.session_id != first, timeout_s=20)
        wait_for(lambda: tm.get(trace_id).processes[0].state == TraceState.DONE, timeout_s=20)
        (p,) = tm.get(trace_id).processes
        assert p.error == REVIVED_NOTE and p.size_bytes == 102
    finally:
        stopping.set()
        conn.cancel()
        thread.join(10)
        server.stop(0)
        shutil.rmtree(d, ignore_errors=True)


class _StubDuringReRegistration:
    """The old registration's stub: while its ReportTrace is in flight the connection thread registers again (and
    sends what was unsent then); the daemon then refuses the old session."""

    def __init__(self, conn: DaemonConnection, new: Any) -> None:
        self.conn, self.new = conn, new

    def ReportTrace(self, request: Any, timeout: float) -> None:  # noqa: N802 - the stub's name
        self.conn._stub, self.conn.session_id = self.new, "new"
        self.conn.registrations += 1
        self.conn._send_unsent()  # what the registration does, before this call's answer is back
        raise _Error("PERMISSION_DENIED")


class _Recording:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str]] = []

    def ReportTrace(self, request: Any, timeout: float) -> None:  # noqa: N802 - the stub's name
        self.sent.append((request.trace_id, request.session_id, request.path))


class _Error(Exception):
    def __init__(self, code: str) -> None:
        self._code = code

    def code(self) -> Any:
        return type("Code", (), {"name": self._code})()


def test_a_final_report_refused_while_the_agent_registers_again_is_sent_with_the_new_session(tmp_path: Path) -> None:
    """It failed after the new registration had sent what was unsent: it waited for a registration after that one
    (none comes while the stream stays up), and the trace stayed failed."""
    ident = AgentIdentity(ME, (), "j", None, None, None, -1, "h", "")
    conn = DaemonConnection(tmp_path / "agent.sock", lambda: ident, lambda cmd: None, threading.Event())
    new = _Recording()
    conn._stub, conn.session_id = _StubDuringReRegistration(conn, new), "old"
    conn.report("t1", "DONE", path="/x")
    assert new.sent == [("t1", "new", "/x")]

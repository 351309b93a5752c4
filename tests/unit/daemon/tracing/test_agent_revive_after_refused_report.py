"""Reviving a trace meets the report sessions: an agent's DONE report sent on its old channel after dynod
ended its registration (its Watch stream ended on dynod's side first) is refused (PERMISSION_DENIED: no session
any more); the agent keeps it, registers again and sends it with the new session, and the trace, failed when the
stream ended, ends done (revived). Real AgentServicer on a Unix socket, the real DaemonConnection."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from dyno.client.agent_connection import DaemonConnection
from dyno.client.agent_env import AgentIdentity
from dyno.client.agent_output import OutputFiles
from dyno.daemon.agent_server import AgentServer
from dyno.daemon.agent_service import AgentServicer
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.agent_side import GONE_REASON, REVIVED_NOTE
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import TraceSpec, TraceState

from conftest import short_tmpdir, wait_for

pytestmark = pytest.mark.unit

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

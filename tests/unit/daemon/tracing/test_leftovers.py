"""dynod removes what a trace left in its folder once the process that was writing it is gone (killed mid-export,
or exited past the agent's cap): temporaries, and a final file of a trace that did not end done. A done trace's
file stays."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_proc import host_a_manager
from manual_clock import Clock

from dyno.client.agent.output import OutputFiles
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import TraceSpec, TraceState

pytestmark = pytest.mark.unit


def _test_user(pid: int) -> int:
    # the fake pids' trainer is this test, which writes their files: a fake pid that is a real process (a kernel
    # thread, owned by root) must not make the daemon's ownership check refuse them when the tests run as non-root
    return os.getuid()


@pytest.fixture
def env(tmp_path: Path) -> tuple[ProcessRegistry, TraceManager]:
    clock = Clock()
    # the processes are gone when removed ("process exited"): an agent one that still runs keeps its files until it
    # is (tests/unit/daemon/tracing/test_agent_reports_at_disconnect.py)
    reg = ProcessRegistry(is_alive=lambda pid: False, clock_ms=clock, uid_of=_test_user)
    tm = host_a_manager(reg, tmp_path / "traces", clock)
    return reg, tm


def test_agent_leftovers_are_removed_when_the_process_is_gone(env: tuple[ProcessRegistry, TraceManager]) -> None:
    reg, tm = env
    reg.register(RegisteredProcess(pid=10, job_id="J", protocol=PROTOCOL_AGENT, session_id="s"))
    done = tm.start(TraceSpec(job_id="J", duration_ms=100, trace_id="t-done"))
    done_path = Path(done.triggered[0].path)
    done_path.write_bytes(b"complete")
    tm.agent_report(10, "t-done", TraceState.DONE)
    failed = tm.start(TraceSpec(job_id="J", duration_ms=100, trace_id="t-failed"))
    files = OutputFiles(Path(failed.triggered[0].path))
    for path in (*files.temporaries(), files.output):
        path.write_bytes(b"partial")
    tm.agent_report(10, "t-failed", TraceState.FAILED, "took longer than 5 s; no file")
    running = tm.start(TraceSpec(job_id="J", duration_ms=100, trace_id="t-running"))
    raw = OutputFiles(Path(running.triggered[0].path)).raw
    raw.write_bytes(b"partial")

    reg.remove(10, "process exited")

    assert [v.state for v in tm.get("t-running").processes] == [TraceState.FAILED]
    assert not raw.exists()  # the trace it was writing when it died
    assert not any(p.exists() for p in (*files.temporaries(), files.output))  # the one given up at exit
    assert done_path.read_bytes() == b"complete"


def test_kineto_leftover_is_removed_when_the_process_is_gone(env: tuple[ProcessRegistry, TraceManager]) -> None:
    reg, tm = env
    poll = KinetoPoll(pid=20, ancestry=(), job_id="7", type_mask=3)
    tm.kineto_poll(poll)
    r = tm.start(TraceSpec(job_id="7", duration_ms=100, trace_id="k1"))
    assert tm.kineto_poll(poll)
    partial = Path(r.triggered[0].path + ".tmp")
    partial.write_bytes(b"half")
    reg.remove(20, "process exited")
    assert [v.state for v in tm.get("k1").processes] == [TraceState.FAILED]
    assert not partial.exists()

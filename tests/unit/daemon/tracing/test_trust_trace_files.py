"""What another local user can put at a trace file's name. Trace folders are 1733 (every trainer writes there) and
the names predictable (`<host>_<pid>.pt.trace.json[.gz]`; trace ids and pids are listed by ListProcesses / GetTrace),
so anyone can create a file there before the traced process publishes its own (whose rename over it then fails:
the sticky bit). dynod believes only the process's own plain file there: never a FIFO (which would block its
housekeeping thread), a symlink (to /dev/zero: read forever) or another user's file."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from fake_proc import host_a_manager
from manual_clock import Clock

from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing import trust
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import TraceSpec, TraceState, UnknownTraceError

pytestmark = pytest.mark.unit

ME = os.geteuid()
OTHER_UID = 65534
as_root = pytest.mark.skipif(ME != 0, reason="a file of another user needs root to make")


def _manager(tmp_path: Path) -> tuple[TraceManager, ProcessRegistry]:
    clock = Clock()
    reg = ProcessRegistry(is_alive=lambda pid: True, uid_of=lambda pid: ME, clock_ms=clock)
    tm = host_a_manager(reg, tmp_path / "traces", clock)
    return tm, reg


def _kineto_trace(tm: TraceManager, pid: int, **spec: int) -> tuple[str, Path]:
    """A kineto process's part in a trace, delivered (libkineto took the config)."""
    tm.kineto_poll(KinetoPoll(pid=pid, ancestry=(), job_id="7", type_mask=3, uid=ME))
    r = tm.start(TraceSpec(job_id="7", trace_id=f"t{pid}", **spec))  # type: ignore[arg-type]
    assert tm.kineto_poll(KinetoPoll(pid=pid, ancestry=(), job_id="7", type_mask=3, uid=ME))  # the config
    return r.trace_id, Path(r.triggered[0].path)


def _housekeeping_returns(tm: TraceManager) -> bool:
    t = threading.Thread(target=tm.housekeeping, daemon=True)
    t.start()
    t.join(10)  # a guard, not a measurement: a blocked open never returns
    return not t.is_alive()


def test_a_fifo_at_a_kineto_file_name_neither_blocks_housekeeping_nor_passes_for_the_trace(tmp_path: Path) -> None:
    tm, _ = _manager(tmp_path)
    trace_id, path = _kineto_trace(tm, 300, iterations=3)  # an iteration trace's file is read for its window
    os.mkfifo(path)
    try:
        returned = _housekeeping_returns(tm)
    finally:
        if not returned:  # release the reader stuck in open(), so the test run goes on
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    assert returned
    (proc,) = tm.get(trace_id).processes
    assert proc.state == TraceState.FAILED and "is not a plain file" in proc.error


def test_a_symlink_at_a_kineto_file_name_is_not_read_nor_taken(tmp_path: Path) -> None:
    tm, _ = _manager(tmp_path)
    trace_id, path = _kineto_trace(tm, 301, iterations=3)
    path.symlink_to("/dev/zero")  # read "to the end" forever
    assert _housekeeping_returns(tm)
    (proc,) = tm.get(trace_id).processes
    assert proc.state == TraceState.FAILED and "is not a plain file" in proc.error
    with pytest.raises(UnknownTraceError):
        tm.trace_file(trace_id, 301)


@as_root
def test_another_users_file_at_a_kineto_file_name_is_not_the_trace(tmp_path: Path) -> None:
    tm, _ = _manager(tmp_path)
    trace_id, path = _kineto_trace(tm, 302, duration_ms=500)
    path.write_text('{"traceEvents": [], "forged": true}')
    os.chown(path, OTHER_UID, OTHER_UID)
    tm.housekeeping()
    (proc,) = tm.get(trace_id).processes
    assert proc.state == TraceState.FAILED and f"owned by uid {OTHER_UID}" in proc.error
    with pytest.raises(UnknownTraceError):
        tm.trace_file(trace_id, 302)


def test_the_processes_own_kineto_file_is_done(tmp_path: Path) -> None:
    tm, _ = _manager(tmp_path)
    trace_id, path = _kineto_trace(tm, 303, duration_ms=500)
    path.write_text('{"traceEvents": []}')
    tm.housekeeping()
    (proc,) = tm.get(trace_id).processes
    assert proc.state == TraceState.DONE and proc.size_bytes == path.stat().st_size
    assert tm.trace_file(trace_id, 303) == path


@as_root
@pytest.mark.parametrize("plant", ["other-user", "symlink", "hard-link"])
def test_an_agents_done_report_is_believed_only_for_its_own_file(tmp_path: Path, plant: str) -> None:
    """ReportTrace carries no proof of who sends it: the file at the name must be the process's."""
    tm, reg = _manager(tmp_path)
    reg.register(RegisteredProcess(pid=7, job_id="J", protocol=PROTOCOL_AGENT, session_id="s7"))
    tm.agent_attach(7, "s7")
    r = tm.start(TraceSpec(job_id="J", duration_ms=500))
    path = Path(r.triggered[0].path)
    secret = tmp_path / "secret"
    secret.write_text("root's")
    if plant == "other-user":
        path.write_text("{}")
        os.chown(path, OTHER_UID, OTHER_UID)
    elif plant == "symlink":
        path.symlink_to(secret)
    else:
        os.link(secret, path)
    tm.agent_report(7, r.trace_id, TraceState.DONE)
    (proc,) = tm.get(r.trace_id).processes
    assert proc.state == TraceState.FAILED and "agent reported done but" in proc.error
    with pytest.raises(UnknownTraceError):
        tm.trace_file(r.trace_id, 7)


def test_trainer_file_stat_names_each_reason(tmp_path: Path) -> None:
    f = tmp_path / "f"
    with pytest.raises(FileNotFoundError):
        trust.trainer_file_stat(f, ME)
    f.write_bytes(b"x")
    assert trust.trainer_file_stat(f, ME).st_size == 1
    assert trust.trainer_file_stat(f).st_size == 1  # uid unknown: not checked
    with pytest.raises(trust.UntrustedFileError, match=f"owned by uid {ME}, not by the traced process's uid {ME + 1}"):
        trust.trainer_file_stat(f, ME + 1)
    os.link(f, tmp_path / "g")
    with pytest.raises(trust.UntrustedFileError, match="has 2 links"):
        trust.trainer_file_stat(f, ME)
    (tmp_path / "l").symlink_to(tmp_path / "missing")
    with pytest.raises(trust.UntrustedFileError, match="not a plain file"):
        trust.trainer_file_stat(tmp_path / "l", ME)

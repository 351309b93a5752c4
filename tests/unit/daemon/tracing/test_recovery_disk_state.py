"""What a restarted dynod knows of a trace that was recording when the previous one stopped, from what is on disk
(review of the restart handling): the processes that had reported done before the restart (the trace folder's
record, written at each process's end, not only the trace's), and a trace whose file names carry the old host name.
Two trace managers over one trace dir stand for the daemon before and after the restart."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_proc import no_proc_identifier
from manual_clock import Clock

from dyno import trace_layout
from dyno.daemon.registered_process import PROTOCOL_AGENT, PROTOCOL_KINETO, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing import journal as tj
from dyno.daemon.tracing.agent_side import ADOPTED_NOTE, RESUMED_NOTE
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import TraceSpec, TraceState, UnknownTraceError

pytestmark = pytest.mark.unit


def _manager(trace_dir: Path, hostname: str = "hostA", clock: Clock | None = None) -> TraceManager:
    clock = clock or Clock()
    reg = ProcessRegistry(is_alive=lambda pid: True, clock_ms=clock, uid_of=lambda pid: os.getuid())
    for pid in (101, 102):
        reg.register(
            RegisteredProcess(pid=pid, job_id="J", protocol=PROTOCOL_AGENT, rank=pid - 101, session_id=f"s{pid}")
        )
    return TraceManager(reg, trace_dir, hostname, clock_ms=clock, kineto_identifier=no_proc_identifier())


def _running(tm: TraceManager, *pids: int) -> str:
    trace_id = tm.start(TraceSpec(job_id="J", duration_ms=5000, pids=pids)).trace_id
    for pid in pids:
        tm.agent_delivered(pid, trace_id)
        tm.agent_report(pid, trace_id, TraceState.RUNNING)
    return trace_id


def _publish(tm: TraceManager, trace_id: str, pid: int, hostname: str = "hostA") -> Path:
    path = trace_layout.agent_output(tm.trace_dir, trace_id, hostname, pid)
    path.write_bytes(b"\x1f\x8b" + bytes(100 * pid))
    return path


def _one_done_then_restart(tmp_path: Path, clock: Clock) -> tuple[TraceManager, str, Path]:
    """A trace of 101 and 102, both recording; 101 reports done to the first daemon, which then restarts: the
    second daemon, the trace id and 101's file."""
    before = _manager(tmp_path / "traces", clock=clock)
    trace_id = _running(before, 101, 102)
    first = _publish(before, trace_id, 101)
    before.agent_report(101, trace_id, TraceState.DONE)
    return _manager(tmp_path / "traces", clock=clock), trace_id, first


def test_a_process_done_before_the_restart_stays_done_after_it(tmp_path: Path) -> None:
    """101 reported done to the old daemon; 102 was still recording when dynod restarted, and reports to the new one.
    The new daemon lists both (dyno-cli fetches both), and 101's file is served."""
    after, trace_id, first = _one_done_then_restart(tmp_path, Clock())
    view = after.get(trace_id)  # dyno-cli's poll, before 102 has reported
    assert not view.finished
    states = {p.pid: p.state for p in view.processes}
    assert states == {101: TraceState.DONE, 102: TraceState.RUNNING}
    assert view.spec.duration_ms == 5000  # the request, as recorded
    assert after.trace_file(trace_id, 101) == first

    second = _publish(after, trace_id, 102)
    after.agent_report(102, trace_id, TraceState.DONE)
    view = after.get(trace_id)
    assert view.finished and [p.state for p in view.processes] == [TraceState.DONE, TraceState.DONE]
    (p102,) = [p for p in view.processes if p.pid == 102]
    assert p102.error == RESUMED_NOTE and p102.size_bytes == second.stat().st_size
    recorded = tj.load_record(after.trace_dir, trace_id)  # another restart finds it finished
    assert recorded is not None and recorded.finished and len(recorded.processes) == 2


def test_a_report_reaches_the_restarted_daemon_before_any_getrace(tmp_path: Path) -> None:
    """The trace is loaded from its folder's record for the report too, not only for GetTrace."""
    after, trace_id, _ = _one_done_then_restart(tmp_path, Clock())
    _publish(after, trace_id, 102)
    after.agent_report(102, trace_id, TraceState.DONE)
    assert [(p.pid, p.state) for p in after.get(trace_id).processes] == [(101, TraceState.DONE), (102, TraceState.DONE)]


def test_a_process_that_never_reports_after_the_restart_times_out(tmp_path: Path) -> None:
    clock = Clock()
    after, trace_id, _ = _one_done_then_restart(tmp_path, clock)
    assert not after.get(trace_id).finished
    assert after.active_trace_ids() == {trace_id}
    clock.ms += 5000 + 31_000  # the window and the completion slack
    after.housekeeping()
    view = after.get(trace_id)
    assert view.finished
    (p102,) = [p for p in view.processes if p.pid == 102]
    assert p102.state == TraceState.TIMED_OUT and "restarted" in p102.error, p102.error


def test_a_kineto_or_pending_process_is_not_waited_for_after_the_restart(tmp_path: Path) -> None:
    """libkineto's processes are not followed across a restart, and an agent cancels a trace it had not started
    recording when its stream ends: neither can report, so the restarted daemon fails them at once, with why."""
    clock = Clock()
    before = _manager(tmp_path / "traces", clock=clock)
    before._registry.register(RegisteredProcess(pid=103, job_id="J", protocol=PROTOCOL_KINETO))
    trace_id = before.start(TraceSpec(job_id="J", duration_ms=5000)).trace_id
    before.agent_delivered(101, trace_id)
    before.agent_report(101, trace_id, TraceState.RUNNING)
    _publish(before, trace_id, 101)
    before.agent_report(101, trace_id, TraceState.DONE)  # 102 never picked it up; 103 is libkineto's
    view = _manager(tmp_path / "traces", clock=clock).get(trace_id)
    assert view.finished
    got = {p.pid: (p.state, p.error) for p in view.processes}
    assert got[101][0] == TraceState.DONE
    assert got[102][0] == TraceState.FAILED and "restarted" in got[102][1]
    assert got[103][0] == TraceState.FAILED and "restarted" in got[103][1] and "libkineto" in got[103][1]


def test_a_hostname_change_across_the_restart_does_not_defeat_adoption(tmp_path: Path) -> None:
    """The agent writes where the old daemon said (its host name in the file name) and reports that path: the
    restarted daemon, under another host name, takes it on from the reported path."""
    before = _manager(tmp_path / "traces", "old-name")
    trace_id = _running(before, 101)
    after = _manager(tmp_path / "traces", "new-name")
    path = _publish(after, trace_id, 101, hostname="old-name")
    after.agent_report(101, trace_id, TraceState.DONE, path=str(path))
    (p,) = after.get(trace_id).processes
    assert (p.state, p.path) == (TraceState.DONE, str(path)) and ADOPTED_NOTE in p.error
    assert after.trace_file(trace_id, 101) == path


def test_a_reported_path_is_believed_only_as_the_pids_file_in_the_traces_folder(tmp_path: Path) -> None:
    before = _manager(tmp_path / "traces", "old-name")
    trace_id = _running(before, 101)
    after = _manager(tmp_path / "traces", "new-name")
    other_pid = _publish(after, trace_id, 102, hostname="old-name")  # another process's file
    elsewhere = tmp_path / "old-name_101.pt.trace.json.gz"  # outside the trace's folder
    elsewhere.write_bytes(b"x")
    odd = after.trace_dir / trace_id / "old-name_101.pt.trace.json"  # not the agent's naming
    odd.write_bytes(b"x")
    for path in (other_pid, elsewhere, odd):
        with pytest.raises(UnknownTraceError):
            after.agent_report(101, trace_id, TraceState.DONE, path=str(path))
    path = _publish(after, trace_id, 101, hostname="old-name")
    with pytest.raises(UnknownTraceError):  # only the folder's own name for it
        after.agent_report(101, trace_id, TraceState.DONE, path=str(path.parent / ".." / trace_id / path.name))
    after.agent_report(101, trace_id, TraceState.DONE, path=str(path))
    assert after.get(trace_id).processes[0].state == TraceState.DONE

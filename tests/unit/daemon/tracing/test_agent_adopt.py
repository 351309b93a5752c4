"""A restarted dynod takes on a trace that was recording when the previous one stopped, from the agent's DONE report
(dyno.daemon.tracing.agent_side._adopt), and nothing else: not a trace it cannot vouch for by its folder and file, not a
finished trace's record, not a process into a trace of its own. Two trace managers over one trace dir stand for the
daemon before and after the restart."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_proc import no_proc_identifier
from manual_clock import Clock

from dyno import trace_layout
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing import journal as tj
from dyno.daemon.tracing.agent_side import ADOPTED_NOTE, GONE_REASON, REVIVED_NOTE
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import TraceSpec, TraceState, UnknownTraceError

pytestmark = pytest.mark.unit

PIDS = (101, 102)


def _manager(trace_dir: Path) -> TraceManager:
    clock = Clock()
    reg = ProcessRegistry(silent_timeout_s=30, is_alive=lambda pid: True, clock_ms=clock)
    for pid in PIDS:
        reg.register(
            RegisteredProcess(pid=pid, job_id="J", protocol=PROTOCOL_AGENT, rank=pid - 101, session_id=f"s{pid}")
        )
    return TraceManager(reg, trace_dir, "hostA", clock_ms=clock, kineto_identifier=no_proc_identifier())


@pytest.fixture
def restarted(tmp_path: Path) -> tuple[TraceManager, str]:
    """A trace of both processes, running when the first daemon stopped; the second daemon, with both re-registered."""
    before = _manager(tmp_path / "traces")
    trace_id = before.start(TraceSpec(job_id="J", duration_ms=5000)).trace_id
    for pid in PIDS:
        before.agent_delivered(pid, trace_id)
        before.agent_report(pid, trace_id, TraceState.RUNNING)
    return _manager(tmp_path / "traces"), trace_id


def _write(tm: TraceManager, trace_id: str, pid: int) -> Path:
    path = trace_layout.agent_output(tm.trace_dir, trace_id, "hostA", pid)
    path.write_bytes(b"\x1f\x8b" + bytes(100 * pid))
    return path


def test_the_agents_done_reports_make_the_trace_known_and_recorded(restarted) -> None:
    tm, trace_id = restarted
    with pytest.raises(UnknownTraceError):
        tm.get(trace_id)
    path = _write(tm, trace_id, 101)
    tm.agent_report(101, trace_id, TraceState.DONE, "a note of the agent's")
    view = tm.get(trace_id)
    (p,) = view.processes
    assert view.finished and view.spec.job_id == "J" and view.spec.duration_ms is None  # the options are unknown
    assert (p.pid, p.state, p.path, p.size_bytes, p.rank) == (101, TraceState.DONE, str(path), path.stat().st_size, 0)
    assert p.error == f"{ADOPTED_NOTE}; a note of the agent's"
    assert tm.trace_file(trace_id, 101) == path

    _write(tm, trace_id, 102)  # the other process of the trace finishes later: same trace
    tm.agent_report(102, trace_id, TraceState.DONE)
    assert [p.pid for p in tm.get(trace_id).processes] == [101, 102]
    recorded = tj.load_record(tm.trace_dir, trace_id)  # what another restart would find
    assert recorded is not None and [(p.pid, p.state) for p in recorded.processes] == [
        (101, TraceState.DONE),
        (102, TraceState.DONE),
    ]
    tm.agent_report(101, trace_id, TraceState.DONE)  # a report sent twice changes nothing
    assert len(tm.get(trace_id).processes) == 2


def test_reports_it_cannot_vouch_for_stay_unknown(restarted, tmp_path: Path) -> None:
    tm, trace_id = restarted
    with pytest.raises(UnknownTraceError):  # no file where the daemon names it
        tm.agent_report(101, trace_id, TraceState.DONE)
    path = _write(tm, trace_id, 101)
    with pytest.raises(UnknownTraceError):  # only DONE takes a trace on
        tm.agent_report(101, trace_id, TraceState.FAILED, "cancelled")
    with pytest.raises(UnknownTraceError):  # a process that is not registered (here)
        tm.agent_report(999, trace_id, TraceState.DONE)
    os.link(path, tmp_path / "second-name")
    with pytest.raises(UnknownTraceError):  # a hard link (its content may be any file's)
        tm.agent_report(101, trace_id, TraceState.DONE)
    os.unlink(tmp_path / "second-name")
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").write_bytes(b"x")
    with pytest.raises(UnknownTraceError):  # a symlink is never followed
        tm.agent_report(101, trace_id, TraceState.DONE)
    (tm.trace_dir / "20260101T000000-made-up").mkdir(mode=0o700)  # a folder dynod did not make
    _write(tm, "20260101T000000-made-up", 101)
    with pytest.raises(UnknownTraceError):
        tm.agent_report(101, "20260101T000000-made-up", TraceState.DONE)
    with pytest.raises(UnknownTraceError):  # not a trace id at all
        tm.agent_report(101, "../x", TraceState.DONE)
    with pytest.raises(UnknownTraceError):
        tm.get(trace_id)


def test_a_finished_traces_record_and_a_trace_of_its_own_are_left_alone(tmp_path: Path) -> None:
    tm = _manager(tmp_path / "traces")
    done = tm.start(TraceSpec(job_id="J", duration_ms=100, pids=(101,))).trace_id
    tm.agent_delivered(101, done)
    _write(tm, done, 101)
    tm.agent_report(101, done, TraceState.DONE)
    record = (tm.trace_dir / done / tj.RECORD_NAME).read_bytes()
    _write(tm, done, 102)
    with pytest.raises(UnknownTraceError):  # this daemon's own trace, where pid 102 has no part
        tm.agent_report(102, done, TraceState.DONE)
    after = _manager(tmp_path / "traces")  # restarted: the trace is known from its record only
    with pytest.raises(UnknownTraceError):
        after.agent_report(102, done, TraceState.DONE)
    assert (tm.trace_dir / done / tj.RECORD_NAME).read_bytes() == record
    assert [p.pid for p in after.get(done).processes] == [101]


def test_a_trace_failed_when_the_agents_stream_broke_is_done_when_the_agent_reports_its_file(tmp_path: Path) -> None:
    """dynod stayed up, the agent's stream broke mid-trace (the trace failed), the agent kept recording and
    registered again: its DONE report makes the trace done after all, with a note, and rewrites its record."""
    tm = _manager(tmp_path / "traces")
    reg = tm._registry
    trace_id = tm.start(TraceSpec(job_id="J", duration_ms=5000, pids=(101,))).trace_id
    tm.agent_delivered(101, trace_id)
    tm.agent_report(101, trace_id, TraceState.RUNNING)
    reg.remove(101, GONE_REASON, session_id="s101")
    (p,) = tm.get(trace_id).processes
    assert (p.state, p.error) == (TraceState.FAILED, f"{GONE_REASON} mid-trace")
    reg.register(RegisteredProcess(pid=101, job_id="J", protocol=PROTOCOL_AGENT, session_id="s101b"))
    path = _write(tm, trace_id, 101)
    tm.agent_report(101, trace_id, TraceState.DONE, "a note")
    (p,) = tm.get(trace_id).processes
    assert (p.state, p.size_bytes, p.error) == (TraceState.DONE, path.stat().st_size, f"{REVIVED_NOTE}; a note")
    recorded = tj.load_record(tm.trace_dir, trace_id)
    assert recorded is not None and recorded.processes[0].state == TraceState.DONE
    # any other failure stays one
    other = tm.start(TraceSpec(job_id="J", duration_ms=5000, pids=(101,))).trace_id
    tm.agent_report(101, other, TraceState.FAILED, "cancelled")
    _write(tm, other, 101)
    tm.agent_report(101, other, TraceState.DONE)
    assert tm.get(other).processes[0].state == TraceState.FAILED

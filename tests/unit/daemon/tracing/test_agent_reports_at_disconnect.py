"""An agent process's Watch stream ends (its connection broke, or dynod is going down) while its trace records or is
being written: what the agent finishes in that window is neither deleted nor dropped: its final file is kept, and
the DONE report that follows is taken."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_proc import host_a_manager
from manual_clock import Clock

from dyno.client.agent.output import OutputFiles
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing import journal as tj
from dyno.daemon.tracing.agent_side import FINISHED_NOTE, GONE_REASON, REVIVED_NOTE
from dyno.daemon.tracing.values import TraceSpec, TraceState

pytestmark = pytest.mark.unit


class Env:
    """A trace manager with agent process 101 registered and its trace running; `dead` holds the pids that are gone."""

    def __init__(self, tmp_path: Path) -> None:
        self.dead: set[int] = set()
        clock = Clock()
        self.reg = ProcessRegistry(
            is_alive=lambda pid: pid not in self.dead, clock_ms=clock, uid_of=lambda pid: os.getuid()
        )
        self.tm = host_a_manager(self.reg, tmp_path / "traces", clock)
        self.reg.register(RegisteredProcess(pid=101, job_id="J", protocol=PROTOCOL_AGENT, session_id="s1"))
        result = self.tm.start(TraceSpec(job_id="J", duration_ms=5000))
        self.trace_id = result.trace_id
        self.files = OutputFiles(Path(result.triggered[0].path))
        self.tm.agent_delivered(101, self.trace_id)
        self.tm.agent_report(101, self.trace_id, TraceState.RUNNING)

    def publish(self) -> int:
        """The agent renames its complete file into place."""
        self.files.output.write_bytes(b"\x1f\x8b" + bytes(300))
        return self.files.output.stat().st_size

    def stream_ended(self) -> None:
        self.reg.remove(101, GONE_REASON, session_id="s1")

    def process(self) -> tuple[TraceState, str, int]:
        (p,) = self.tm.get(self.trace_id).processes
        return p.state, p.error, p.size_bytes


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def test_a_file_published_just_before_the_stream_ended_is_kept_and_done(env: Env) -> None:
    size = env.publish()
    env.stream_ended()  # before the agent's DONE report got out
    assert env.files.output.exists()
    assert env.process() == (TraceState.DONE, FINISHED_NOTE, size)
    recorded = tj.load_record(env.tm.trace_dir, env.trace_id)
    assert recorded is not None and recorded.processes[0].state == TraceState.DONE
    env.tm.agent_report(101, env.trace_id, TraceState.DONE)  # the report, late: changes nothing
    assert env.process() == (TraceState.DONE, FINISHED_NOTE, size)


def test_a_done_report_right_after_the_stream_ended_revives_the_trace(env: Env) -> None:
    """The agent, not yet aware that its stream ended, publishes and reports through its old channel: its pid is not
    registered any more, and the trace was failed when its stream ended."""
    env.stream_ended()
    assert env.process()[0] == TraceState.FAILED
    size = env.publish()
    env.tm.agent_report(101, env.trace_id, TraceState.DONE, "a note")
    assert env.process() == (TraceState.DONE, f"{REVIVED_NOTE}; a note", size)
    env.tm.housekeeping()
    assert env.files.output.exists()


def test_a_done_report_that_cannot_be_believed_says_why_in_the_trace(env: Env) -> None:
    env.stream_ended()
    env.tm.agent_report(101, env.trace_id, TraceState.DONE)  # but no file is there
    state, error, _ = env.process()
    assert state == TraceState.FAILED
    assert error.startswith(f"{GONE_REASON} mid-trace; ") and "reported it done" in error, error
    assert str(env.files.output) in error and "missing" in error, error
    recorded = tj.load_record(env.tm.trace_dir, env.trace_id)
    assert recorded is not None and recorded.processes[0].error == error


def test_what_a_disconnected_process_writes_is_removed_only_once_it_is_gone(env: Env) -> None:
    env.stream_ended()  # the process still runs: it may yet finish (and report) its trace
    env.files.raw.write_bytes(b"partial export")
    env.tm.housekeeping()
    assert env.files.raw.exists()
    env.dead.add(101)
    env.tm.housekeeping()
    assert not env.files.raw.exists()  # the process is gone: nothing can complete it any more


def test_a_dead_processs_leftovers_go_at_once(env: Env) -> None:
    env.files.raw.write_bytes(b"partial export")
    env.dead.add(101)
    env.stream_ended()
    assert not env.files.raw.exists()
    assert env.process()[:2] == (TraceState.FAILED, f"{GONE_REASON} mid-trace")

"""What dynod says when libkineto left `<file>.tmp` unfinished at the deadline (tracing/kineto_leftovers.py cites the
libkineto source): a non-empty one is a failed write (libkineto takes later requests as before: make room, trace
again); an empty one is either a start libkineto refused as already past ("Not starting tracing - start timestamp is
in the past": it opens the file before it checks the start) or a write that failed at once; each says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_proc import host_a_manager
from manual_clock import Clock

from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.kineto_leftovers import discard_unfinished_kineto_file
from dyno.daemon.tracing.table import TraceLimits
from dyno.daemon.tracing.values import TraceSpec, TraceState

pytestmark = pytest.mark.unit


def _timed_out_reason(tmp_path: Path, content: bytes) -> tuple[str, Path]:
    clock = Clock()
    reg = ProcessRegistry(silent_timeout_s=30, is_alive=lambda pid: True, clock_ms=clock)
    tm = host_a_manager(reg, tmp_path / "traces", clock, TraceLimits(completion_slack_s=5))
    poll = KinetoPoll(pid=300, ancestry=(), job_id="7", type_mask=3)
    tm.kineto_poll(poll)
    tm.start(TraceSpec(job_id="7", duration_ms=500, trace_id="kpast"))
    assert tm.kineto_poll(poll)  # delivered
    partial = tm.trace_dir / "kpast" / "hostA_300.pt.trace.json.tmp"
    partial.write_bytes(content)
    tm.housekeeping()
    assert tm.get("kpast").processes[0].state == TraceState.RUNNING  # a .tmp there: libkineto has begun
    clock.ms += 60_000
    tm.housekeeping()
    p = tm.get("kpast").processes[0]
    assert p.state == TraceState.TIMED_OUT
    return p.error, partial


def test_an_empty_temp_file_names_the_refused_start_and_the_failed_write(tmp_path: Path) -> None:
    reason, partial = _timed_out_reason(tmp_path, b"")  # what a start libkineto refused leaves
    assert reason.startswith(f"no complete trace file by the deadline: libkineto's {partial} was left empty")
    assert "Not starting tracing - start timestamp is in the past" in reason and "--start-delay-s" in reason
    assert "Failed to write to log file!" in reason and "trace again" in reason
    assert "a failed write?" not in reason  # not the only possibility any more
    assert not partial.exists()


def test_a_partial_temp_file_is_a_failed_write_and_says_what_to_do(tmp_path: Path) -> None:
    reason, partial = _timed_out_reason(tmp_path, b'{"traceEvents": [' + b" " * 100)
    assert f"{partial} was never completed (a failed write? removed it" in reason
    assert "Failed to write to log file!" in reason and "takes later requests as before" in reason
    assert reason.endswith("make room there and trace again")
    assert "start timestamp" not in reason
    assert not partial.exists()


def test_unfinished_kineto_temp_file_is_named_in_the_reason_and_removed(tmp_path: Path) -> None:
    # what libkineto leaves when its write fails (a full trace dir): the reason says how much room is left
    reason, partial = _timed_out_reason(tmp_path, b'{"traceEvents": [' + b" " * 100)
    assert f"{partial} was never completed" in reason and "bytes free" in reason
    assert not partial.exists()


def test_no_temp_file_no_reason(tmp_path: Path) -> None:
    assert discard_unfinished_kineto_file(tmp_path / "hostA_1.pt.trace.json") == ""

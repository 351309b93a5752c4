"""A libkineto trace whose write failed (a full trace dir): libkineto logs "Failed to write to log file!" and
leaves `<path>.tmp` behind. At the deadline the daemon must say so, not only "no complete trace file", and remove
the partial file."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_proc import no_proc_identifier
from manual_clock import Clock

from dyno.daemon.kineto_ipc import KinetoPoll
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.trace_manager import TraceManager
from dyno.daemon.trace_types import TraceSpec, TraceState

pytestmark = pytest.mark.unit


def test_unfinished_kineto_temp_file_is_named_in_the_reason_and_removed(tmp_path: Path) -> None:
    clock = Clock()
    reg = ProcessRegistry(silent_timeout_s=30, is_alive=lambda pid: True, clock_ms=clock)
    tm = TraceManager(
        reg, tmp_path / "traces", "hostA", completion_slack_s=5, clock_ms=clock, kineto_identifier=no_proc_identifier()
    )
    poll = KinetoPoll(pid=300, ancestry=(), job_id="7", type_mask=3)
    tm.kineto_poll(poll)
    tm.start(TraceSpec(job_id="7", duration_ms=500, trace_id="kfull"))
    assert tm.kineto_poll(poll)  # delivered
    partial = tm.trace_dir / "kfull" / "hostA_300.pt.trace.json.tmp"
    partial.write_bytes(b'{"traceEvents": [' + b" " * 100)  # what libkineto leaves when its write fails
    tm.housekeeping()
    assert tm.get("kfull").processes[0].state == TraceState.RUNNING
    clock.ms += 60_000
    tm.housekeeping()
    p = tm.get("kfull").processes[0]
    assert p.state == TraceState.TIMED_OUT
    assert f"{partial} was never completed" in p.error and "bytes free" in p.error
    assert not partial.exists()

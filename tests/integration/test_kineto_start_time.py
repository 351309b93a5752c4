"""A synchronized start too close for libkineto when it picks the request up: given no start time, libkineto starts
~2 s after the pickup (its profiler thread looks at a config once a second and refuses a start already past), so dynod
sends a start 1.3 s after the pickup, and the note says how late that is after the synchronized start time. A real
KINETO_USE_DAEMON=1 CPU torch trainer (1 s poll), a real dynod; the file's recording window is checked against the
note (libkineto never starts before the start time it was given: a lower bound only, never a timing)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from kineto_daemon import kineto_daemon

from dyno.client.client import DynoClient
from dyno.daemon.tracing.kineto_window import record_window
from dyno.v1 import dyno_pb2

from conftest import wait_for

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

FINAL = {dyno_pb2.TRACE_STATE_DONE, dyno_pb2.TRACE_STATE_FAILED, dyno_pb2.TRACE_STATE_TIMED_OUT}


def _window_start_ms(path: Path) -> float:
    """The recording window's start as unix ms (the file's timestamps are µs after its baseTimeNanoseconds)."""
    window = record_window(path)
    assert window is not None, path
    with open(path, "rb") as f:
        base = re.search(rb'"baseTimeNanoseconds":\s*([0-9]+)', f.read())
    assert base is not None
    return int(base.group(1)) / 1e6 + window.start_us / 1000


def _trace(c: DynoClient, job: str, start_in_s: float) -> tuple[dyno_pb2.ProcessTraceStatus, int]:
    start_ms = int((time.time() + start_in_s) * 1000)
    trace_id = c.start_trace(dyno_pb2.TraceRequest(job_id=job, duration_ms=300, start_time_ms=start_ms)).trace_id
    proc = wait_for(lambda: (p := c.get_trace(trace_id).processes[0]).state in FINAL and p, 60, 0.1)
    assert proc.state == dyno_pb2.TRACE_STATE_DONE, proc.error
    return proc, start_ms


def test_a_start_too_close_at_pickup_is_moved_and_the_note_says_how_late() -> None:
    with kineto_daemon() as kd:
        _check(kd)


def _check(kd) -> None:  # type: ignore[no-untyped-def]
    job = kd.new_job()
    kd.start_trainer("agent_trainer.py", "--seconds", "120", job=job, ready=lambda line: line.startswith("step"))
    kd.registered(job, 1)
    with DynoClient(kd.daemon.target, timeout_s=5) as c:
        # 4 s ahead, polled within 1 s: made on time, no note
        kept, start_ms = _trace(c, job, 4.0)
        assert kept.error == ""
        assert _window_start_ms(Path(kept.path)) >= start_ms - 1
        # 0.2 s ahead: too close (or already past) at the pickup; libkineto starts when dynod moved the start to
        moved, start_ms = _trace(c, job, 0.2)
        m = re.match(
            r"started ([0-9.]+) s after the synchronized start time: libkineto picked the request up", moved.error
        )
        assert m is not None, moved.error
        assert "--start-delay-s" in moved.error
        assert (
            _window_start_ms(Path(moved.path)) >= start_ms + float(m.group(1)) * 1000 - 100
        )  # the note rounds to 0.1 s
        json.loads(Path(moved.path).read_text())  # a complete trace

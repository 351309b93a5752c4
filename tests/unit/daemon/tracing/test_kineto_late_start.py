"""A kineto duration trace whose synchronized start is past, or too close, when libkineto picks the request up
(libkineto refuses a PROFILE_START_TIME already past and traces nothing): dynod sends the config with the start moved
to when libkineto can make it (1.3 s after the pickup), and the done trace's note says when it was picked up and how
late it really started."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_proc import ProcTable, kineto_manager

from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.values import TraceSpec, TraceState

pytestmark = pytest.mark.unit

WORKER = b"python3\0-u\0train.py\0"


def poll(pid: int) -> KinetoPoll:
    return KinetoPoll(pid=pid, ancestry=(50,), job_id="7", type_mask=3)


def started(tmp_path: Path, start_in_ms: int, picked_up_after_ms: int) -> tuple[object, str, str]:
    """A trace of one kineto process starting `start_in_ms` from the request, picked up `picked_up_after_ms` after
    it; -> (manager, trace id, the config libkineto got)."""
    tm = kineto_manager(tmp_path, ProcTable({101: ("python3", WORKER)}), [poll(101)])
    clock = tm._clock_ms  # type: ignore[attr-defined]
    r = tm.start(TraceSpec(job_id="7", duration_ms=500, start_time_ms=clock() + start_in_ms))
    assert [v.pid for v in r.triggered] == [101]
    clock.ms += picked_up_after_ms
    config = tm.kineto_poll(poll(101))
    assert config is not None
    return tm, r.trace_id, config


def finish(tm, trace_id: str) -> object:
    """libkineto writes the file; housekeeping sees it complete."""
    path = Path(tm.get(trace_id).processes[0].path)
    path.write_text('{"traceEvents": []}')
    tm.housekeeping()
    return tm.get(trace_id).processes[0]


def test_start_already_past_at_pickup_is_dropped_and_noted(tmp_path: Path) -> None:
    tm, trace_id, config = started(tmp_path, start_in_ms=1000, picked_up_after_ms=4000)  # --start-delay-s 1, 5 s poll
    assert f"PROFILE_START_TIME={tm._clock_ms() + 1300}" in config  # type: ignore[attr-defined]
    assert "ACTIVITIES_DURATION_MSECS=500" in config and "ACTIVITIES_WARMUP_PERIOD_SECS=0" in config
    proc = finish(tm, trace_id)
    assert proc.state == TraceState.DONE
    assert "started 4.3 s after the synchronized start time" in proc.error and "--start-delay-s" in proc.error


def test_start_just_ahead_at_pickup_is_moved_too(tmp_path: Path) -> None:
    tm, _, config = started(tmp_path, start_in_ms=6000, picked_up_after_ms=5500)  # 0.5 s left: too close to make
    assert f"PROFILE_START_TIME={tm._clock_ms() + 1300}" in config  # type: ignore[attr-defined]


def test_start_well_ahead_is_kept_and_the_trace_has_no_note(tmp_path: Path) -> None:
    tm, trace_id, config = started(tmp_path, start_in_ms=6000, picked_up_after_ms=1000)
    assert "PROFILE_START_TIME=" in config
    proc = finish(tm, trace_id)
    assert proc.state == TraceState.DONE and proc.error == ""


def test_a_start_just_ahead_at_pickup_is_noted_as_early(tmp_path: Path) -> None:
    tm, trace_id, config = started(tmp_path, start_in_ms=6000, picked_up_after_ms=5300)  # 0.7 s left
    assert "PROFILE_START_TIME=" in config  # moved: 1.3 s after the pickup
    proc = finish(tm, trace_id)
    assert proc.state == TraceState.DONE
    assert proc.error.startswith(
        "started 0.6 s after the synchronized start time: libkineto picked the request up 0.7 s before it"
    )


def test_a_start_past_at_pickup_is_still_noted_as_late(tmp_path: Path) -> None:
    tm, trace_id, _ = started(tmp_path, start_in_ms=1000, picked_up_after_ms=3500)
    assert "started 3.8 s after the synchronized start time: libkineto picked the request up 2.5 s after it" in (
        finish(tm, trace_id).error
    )

"""A kineto trace whose synchronized start is still ahead at pickup, but too close for libkineto to make it, starts
at once: before the other processes, which its note must say (it read "0.0 s after the synchronized start time")."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_trainerux_kineto_late_start import finish, started

from dyno.daemon.trace_types import TraceState

pytestmark = pytest.mark.unit


def test_a_start_just_ahead_at_pickup_is_noted_as_early(tmp_path: Path) -> None:
    tm, trace_id, config = started(tmp_path, start_in_ms=6000, picked_up_after_ms=5300)  # 0.7 s left
    assert "PROFILE_START_TIME" not in config
    proc = finish(tm, trace_id)
    assert proc.state == TraceState.DONE
    assert "0.7 s before the synchronized start time" in proc.error and "after" not in proc.error.split("(")[0]


def test_a_start_past_at_pickup_is_still_noted_as_late(tmp_path: Path) -> None:
    tm, trace_id, _ = started(tmp_path, start_in_ms=1000, picked_up_after_ms=3500)
    assert "2.5 s after the synchronized start time" in finish(tm, trace_id).error

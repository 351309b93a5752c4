"""A kineto trace whose synchronized start is still ahead at pickup, but too close for libkineto to make it: its note
says when it was picked up (it read "0.0 s after the synchronized start time"), and when it really started: after
the synchronized start (dynod moves the start to when libkineto can make it; it sent none, and libkineto started ~2 s
after the pickup, while the note said "before")."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_trainerux_kineto_late_start import finish, started

from dyno.daemon.tracing.values import TraceState

pytestmark = pytest.mark.unit


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

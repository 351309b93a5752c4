"""An agent duration trace whose synchronized start time had passed when it could start is done with a note saying
its window is not the other processes'; one started on time has none. In-process, with the real torch profiler."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
pytest.importorskip("torch")


def _run(tmp_path: Path, name: str, start_in_ms: int) -> str:
    import torch  # noqa: F401 - the agent uses the torch the program loaded

    from dyno.client.agent.trace import AgentTraceSpec, StepCounter, run_trace

    spec = AgentTraceSpec(
        trace_id=name,
        output_path=tmp_path / f"{name}.pt.trace.json.gz",
        duration_ms=50,
        start_time_ms=int(time.time() * 1000) + start_in_ms,
    )
    result = run_trace(spec, StepCounter(), threading.Event(), lambda: None)
    assert result.path.exists()
    return result.note


def test_late_duration_trace_says_it_is_not_aligned(tmp_path: Path) -> None:
    note = _run(tmp_path, "late", -3000)
    assert note.startswith("started 3.") and "after the synchronized start time" in note
    assert "not aligned with the other processes" in note


def test_duration_trace_started_on_time_has_no_note(tmp_path: Path) -> None:
    assert _run(tmp_path, "on-time", 200) == ""

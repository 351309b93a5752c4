"""analyses.steps on an iteration trace: the profiler is started and stopped in optimizer step hooks, so its last
optimizer call's range is closed at the profiler's stop; that step ends with its last CPU op, not with the stop."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis.analyses.steps import step_timings
from dyno.trace_analysis.loader import load_trace

pytestmark = pytest.mark.unit


def _iteration_trace(tmp_path: Path, stop_us: float) -> Path:
    """Three optimizer calls of 1 ms steps (each with one update op); the profiler's own span from 0 to the last
    call's recorded end, which holds a stop of `stop_us`."""
    b = TraceBuilder()
    for k in range(3):
        call = 900.0 + 1000.0 * k
        last = k == 2
        b.cpu("Optimizer.step#SGD.step", call, 100.0 + (stop_us if last else 0.0), cat="user_annotation")
        b.cpu("aten::add_", call + 10.0, 80.0)
    b.cpu("PyTorch Profiler (0)", 0.0, 3000.0 + stop_us, cat="Trace")
    return b.write(tmp_path / "iteration.json")


def test_the_last_step_ends_with_its_last_op_not_the_profilers_stop(tmp_path: Path) -> None:
    stats = step_timings(load_trace(_iteration_trace(tmp_path, stop_us=70_000.0)))
    assert stats.source == "optimizer" and len(stats.steps) == 3
    # step 1: the profiler's start to the first call's end; steps 2, 3: call end to call end (the last at its op)
    assert [round(s.dur_us) for s in stats.steps] == [1000, 1000, 990]
    assert stats.max_us == pytest.approx(1000.0)

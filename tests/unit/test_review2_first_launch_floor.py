"""slow-runtime-calls calls a slow first launch "one-off start-up" only when it is as long as a start-up call
(``STARTUP_MIN_CALL_US``, 1 ms: module loading takes milliseconds). A steady-state trace's first launch *in the
trace* of each kernel loads nothing: six kernels each launched once with 200 µs calls (a contended host) were
reported as "6 of them the first launch of their kernel (one-off start-up)", capped at low, with the lazy-loading
fix, while the start-up measure itself found no start-up call in the trace."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.rules import Severity

pytestmark = pytest.mark.unit


def _trace(tmp_path: Path, call_us: float) -> Path:
    """Six distinct kernels, each launched once by a ``call_us`` call, over ~12 ms (GPU mostly idle)."""
    b = TraceBuilder()
    for i in range(6):
        t = i * 2_000.0
        b.launch(f"void kernel_{i}<float>(float*)", t, t + call_us + 10.0, 50.0, dur=call_us)
    return b.write(tmp_path / "t.json")


def test_sub_millisecond_first_launches_are_not_start_up(tmp_path: Path) -> None:
    (f,) = analyze([_trace(tmp_path, 200.0)], rules=["slow-runtime-calls"]).findings_of("slow-runtime-calls")
    assert f.evidence.counts["slow_calls"] == 6
    assert "first launch" not in f.title and "start-up" not in f.title
    assert f.evidence.counts["first_launch_calls"] == 0
    assert "CUDA_MODULE_LOADING" not in f.fix and "full launch queue" in f.fix
    assert f.severity is Severity.MEDIUM  # 900 µs over the limit in a ~10 ms window: not capped at low


def test_millisecond_first_launches_still_are(tmp_path: Path) -> None:
    (f,) = analyze([_trace(tmp_path, 1_500.0)], rules=["slow-runtime-calls"]).findings_of("slow-runtime-calls")
    assert "6 of them the first launch of their kernel" in f.title
    assert f.evidence.counts["first_launch_calls"] == 6
    assert f.severity is Severity.LOW and "CUDA_MODULE_LOADING" in f.fix

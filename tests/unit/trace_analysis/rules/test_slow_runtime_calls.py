"""slow-runtime-calls: a kernel's first launch that takes seconds is one-off start-up (lazy module loading, PTX
JIT), not a launch waiting on a full queue or a lock."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.rules import Severity

pytestmark = pytest.mark.unit


def _trace(tmp_path: Path, slow_first: bool) -> Path:
    """Ten launches of one kernel over 20 s (GPU mostly idle); one launch call takes 2 s: the first or the fifth."""
    b = TraceBuilder()
    slow_at = 0 if slow_first else 4
    for i in range(10):
        t = i * 2_000_000.0 + 10.0
        dur = 2_000_000.0 - 100.0 if i == slow_at else 5.0
        b.launch("void gemm_kernel<float>(float*)", t, t + dur + 10.0, 50.0, dur=dur)
    return b.write(tmp_path / "t.json")


def _finding(path: Path):
    (f,) = analyze([path], rules=["slow-runtime-calls"]).findings_of("slow-runtime-calls")
    return f


def test_slow_first_launch_is_one_off_start_up(tmp_path: Path) -> None:
    f = _finding(_trace(tmp_path, slow_first=True))
    assert "1 of them the first launch of their kernel" in f.title and "one-off start-up" in f.title
    assert f.severity is Severity.LOW  # 10% of the window: medium for a per-step cost
    assert "CUDA_MODULE_LOADING" in f.fix and "warmup" in f.fix
    assert f.evidence.counts["first_launch_calls"] == 1
    assert f.evidence.time_lost_us == pytest.approx(2_000_000.0 - 150.0)  # still measured: it happened here


def test_slow_later_launch_is_not_one_off(tmp_path: Path) -> None:
    f = _finding(_trace(tmp_path, slow_first=False))
    assert "first launch" not in f.title
    assert f.severity is Severity.MEDIUM
    assert "full launch queue" in f.fix and "CUDA_MODULE_LOADING" not in f.fix
    assert f.evidence.counts["first_launch_calls"] == 0


# slow-runtime-calls calls a slow first launch "one-off start-up" only when it is as long as a start-up call
# (STARTUP_MIN_CALL_US, 1 ms: module loading takes milliseconds); a steady-state trace's first launches are not.


def _floor_trace(tmp_path: Path, call_us: float) -> Path:
    """Six distinct kernels, each launched once by a ``call_us`` call, over ~12 ms (GPU mostly idle)."""
    b = TraceBuilder()
    for i in range(6):
        t = i * 2_000.0
        b.launch(f"void kernel_{i}<float>(float*)", t, t + call_us + 10.0, 50.0, dur=call_us)
    return b.write(tmp_path / "t.json")


def test_sub_millisecond_first_launches_are_not_start_up(tmp_path: Path) -> None:
    (f,) = analyze([_floor_trace(tmp_path, 200.0)], rules=["slow-runtime-calls"]).findings_of("slow-runtime-calls")
    assert f.evidence.counts["slow_calls"] == 6
    assert "first launch" not in f.title and "start-up" not in f.title
    assert f.evidence.counts["first_launch_calls"] == 0
    assert "CUDA_MODULE_LOADING" not in f.fix and "full launch queue" in f.fix
    assert f.severity is Severity.MEDIUM  # 900 µs over the limit in a ~10 ms window: not capped at low


def test_millisecond_first_launches_still_are(tmp_path: Path) -> None:
    (f,) = analyze([_floor_trace(tmp_path, 1_500.0)], rules=["slow-runtime-calls"]).findings_of("slow-runtime-calls")
    assert "6 of them the first launch of their kernel" in f.title
    assert f.evidence.counts["first_launch_calls"] == 6
    assert f.severity is Severity.LOW and "CUDA_MODULE_LOADING" in f.fix

"""optimizer: its time lost is the single-tensor steps' whole time, an upper bound on what foreach/fused saves;
``time_lost_basis`` (printed "time lost = ...") states it, and what the zero_grad figure is."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_text

pytestmark = pytest.mark.unit


def _trace(tmp_path: Path, update: str) -> Path:
    b = TraceBuilder()
    for step in range(3):
        t0 = step * 1000.0
        b.step(step + 1, t0, 900.0)
        b.cpu("Optimizer.zero_grad#SGD.zero_grad", t0 + 10.0, 40.0)
        if update == "aten::add_":
            b.cpu("aten::zero_", t0 + 20.0, 10.0)
        b.cpu("Optimizer.step#SGD.step", t0 + 100.0, 500.0)
        for i in range(6):
            b.cpu(update, t0 + 110.0 + i * 50.0, 40.0)
    return b.write(tmp_path / f"{update.strip(':_')}.json")


def test_single_tensor_and_zero_grad_state_their_basis(tmp_path: Path) -> None:
    report = analyze([_trace(tmp_path, "aten::add_")], rules=["optimizer"])
    single, zero = report.findings_of("optimizer")
    assert single.title.startswith("single-tensor optimizer") and "upper bound" in (
        single.evidence.time_lost_basis or ""
    )
    assert single.evidence.time_lost_us == pytest.approx(1500.0)
    assert "aten::zero_" in (zero.evidence.time_lost_basis or "")
    assert "time lost = the single-tensor optimizer steps' time, an upper bound" in render_text(report, width=0)


def test_foreach_optimizer_has_no_finding(tmp_path: Path) -> None:
    report = analyze([_trace(tmp_path, "aten::_foreach_add_")], rules=["optimizer"])
    assert report.findings_of("optimizer") == []


def test_a_step_still_open_at_the_profilers_stop_counts_up_to_its_last_update(tmp_path: Path) -> None:
    """An iteration trace stops the profiler in the last step's post-hook: that step's range is closed at the stop,
    its recorded length the stop's own time (here 70 ms); only its updates count."""
    b = TraceBuilder()
    for step in range(2):
        t0 = step * 1000.0
        b.step(step + 1, t0, 900.0)
        last = step == 1
        b.cpu("Optimizer.step#SGD.step", t0 + 100.0, 70_000.0 if last else 500.0)
        for i in range(6):
            b.cpu("aten::add_", t0 + 110.0 + i * 50.0, 40.0)
    b.cpu("PyTorch Profiler (0)", 0.0, 71_100.0, cat="Trace")  # the profiler's span, ending at its stop
    report = analyze([b.write(tmp_path / "open-at-stop.json")], rules=["optimizer"])
    (single,) = report.findings_of("optimizer")
    # the first step whole (500 µs), the open one from its start to its last update's end (100 -> 400 µs: 300 µs)
    assert single.evidence.time_lost_us == pytest.approx(500.0 + 300.0)

"""Findings that count the same GPU idle time (low-gpu-util, host-bound, gpu-starvation, ...) say so under the
findings header: alexnet's report listed "lost 12.86 s", "lost 12.85 s", "lost 12.73 s" (three views of one
12.9 s idle span) with nothing telling the reader not to add them up."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_html, render_text

pytestmark = pytest.mark.unit


def _idle_trace(tmp_path: Path) -> Path:
    b = TraceBuilder()
    b.launch("k1", 0.0, 10.0, 100.0)
    b.launch("k2", 700_300.0, 700_400.0, 100.0)  # a 700 ms GPU idle gap: low-gpu-util and gpu-starvation
    return b.write(tmp_path / "idle.json")


def test_overlapping_findings_get_the_note(tmp_path: Path) -> None:
    report = analyze([_idle_trace(tmp_path)], rules=["low-gpu-util", "gpu-starvation"])
    assert len(report.findings) == 2
    text = render_text(report, width=0)
    assert "(time lost overlaps: low-gpu-util and gpu-starvation count the same GPU idle time on a rank" in text
    assert "Time lost overlaps: low-gpu-util and gpu-starvation count" in render_html(report)


def test_one_idle_finding_gets_no_note(tmp_path: Path) -> None:
    report = analyze([_idle_trace(tmp_path)], rules=["gpu-starvation"])
    assert len(report.findings) == 1
    assert "overlaps" not in render_text(report) and "overlaps" not in render_html(report)

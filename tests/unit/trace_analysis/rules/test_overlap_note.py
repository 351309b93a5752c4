"""Findings that count the same GPU idle time (low-gpu-util, host-bound, gpu-starvation, ...) say so under the
findings header, so the reader does not add their times lost up."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_html, render_text
from dyno.trace_analysis.report.phrases import overlap_note
from dyno.trace_analysis.rules import Severity
from dyno.trace_analysis.rules.base import Evidence, Finding

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


# The "time lost overlaps" line names only findings whose time lost really overlaps


def _f(rule: str, rank: int = 0) -> Finding:
    return Finding(rule, Severity.HIGH, "t", Evidence(time_lost_us=100.0), "fix", rank)


def test_idle_and_exposed_comm_get_no_note(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.launch("void gemm_kernel<float>(float*)", 0.0, 10.0, 100.0)
    b.launch("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", 20.0, 1_000.0, 300.0, stream=20)
    b.launch("void gemm_kernel<float>(float*)", 1_900.0, 2_000.0, 100.0)
    report = analyze([b.write(tmp_path / "t.json")], rules=["low-gpu-util", "exposed-comm"])
    assert {f.rule_id for f in report.findings} == {"low-gpu-util", "exposed-comm"}
    assert "overlaps" not in render_text(report)


def test_which_rules_are_named() -> None:
    assert overlap_note([_f("low-gpu-util"), _f("exposed-comm"), _f("sync-calls")]) == (
        "time lost overlaps: low-gpu-util and sync-calls count the same GPU idle time on a rank; do not add them up"
    )
    note = overlap_note([_f("host-bound"), _f("exposed-comm")])
    assert note is not None and note.startswith("time lost overlaps: host-bound and exposed-comm count the same time")
    assert overlap_note([_f("exposed-comm"), _f("low-gpu-util", rank=1), _f("host-bound", rank=2)]) is None
    assert overlap_note([_f("exposed-comm"), _f("gpu-starvation")]) is None

"""The report's GPU breakdown gives HTA's comm/comp overlap (JSON ``breakdown.comm_overlap_pct``, text
"communication kernels 13.4% (1.4% under compute)"). Before, the only overlap figure was the exposed-comm
title's, over its window and rounded to whole percents ("overlap 2%" where HTA says 1.37%)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_json, render_text

from conftest import SHARED_TRACES

pytestmark = pytest.mark.unit

NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
SHARED = SHARED_TRACES


def _breakdown(paths: list[Path]) -> list[dict]:
    return [r["breakdown"] for r in json.loads(render_json(analyze(paths, rules=[])))["ranks"]]


def test_overlap_of_a_synthetic_trace(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.launch(NCCL, 0.0, 100.0, 400.0, stream=20)  # communication 100..500
    b.launch("compute_kernel", 1.0, 50.0, 150.0)  # compute 50..200: 100 µs of it under communication
    path = b.write(tmp_path / "t.json")
    (bd,) = _breakdown([path])
    assert bd["comm_overlap_pct"] == pytest.approx(25.0)
    assert "communication kernels 88.9% (25.0% under compute)" in render_text(analyze([path], rules=[]))


def test_no_communication_no_overlap(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.busy_gpu(0.0, 10)
    path = b.write(tmp_path / "t.json")
    (bd,) = _breakdown([path])
    assert bd["comm_overlap_pct"] is None  # HTA: NaN
    assert "under compute" not in render_text(analyze([path], rules=[]))


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared GPU traces not available")
@pytest.mark.parametrize(
    ("trace", "hta"),
    [("negative_queue_length_values_check", [1.37]), ("trace_filter", [11.81, 20.05])],
)
def test_matches_hta_on_shared_traces(trace: str, hta: list[float]) -> None:
    got = [bd["comm_overlap_pct"] for bd in _breakdown([SHARED / trace])]
    assert got == pytest.approx(hta, abs=0.01)

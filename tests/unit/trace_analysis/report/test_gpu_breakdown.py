"""The report's GPU breakdown gives HTA's comm/comp overlap (JSON ``breakdown.comm_overlap_pct``, text
"communication kernels 13.4% (1.4% under compute)"), as HTA computes it, not rounded to whole percents."""

from __future__ import annotations

import json
import re
from pathlib import Path
from xml.etree import ElementTree

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_html, render_json, render_text

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


# HTML GPU-breakdown bars: communication under compute is compute time already, so the segments sum to 100%.


def _overlapping(tmp_path):
    b = TraceBuilder()
    b.launch("gemm_kernel", 0.0, 10.0, 400.0)  # compute [10, 410)
    b.launch("ncclKernel_AllReduce_RING_LL", 1.0, 110.0, 600.0, stream=20)  # comm [110, 710): 300 under compute
    b.launch("gemm_kernel", 900.0, 910.0, 100.0)  # compute [910, 1010); idle [710, 910)
    return analyze(b.write(tmp_path / "t.json"))


def test_breakdown_bars_fit_and_add_up(tmp_path):
    report = _overlapping(tmp_path)
    (svg,) = [s for s in re.findall(r"<svg.*?</svg>", render_html(report), re.S) if "GPU time breakdown" in s]
    root = ElementTree.fromstring(svg)
    width = float(root.get("width"))
    bars = [r for r in root.iter("rect") if r.find("title") is not None]
    assert bars and max(float(r.get("x")) + float(r.get("width")) for r in bars) <= width - 10 + 0.5
    assert sum(float(r.get("width")) for r in bars) == pytest.approx(width - 70 - 10, abs=0.5)
    assert any("communication not under compute: 300 µs" in r.find("title").text for r in bars)


def test_json_breakdown_has_the_exposed_part(tmp_path):
    b = json.loads(render_json(_overlapping(tmp_path)))["ranks"][0]["breakdown"]
    assert b["communication_us"] == 600.0 and b["exposed_communication_us"] == 300.0
    assert b["exposed_communication_pct"] == pytest.approx(100 * 300 / 1000)

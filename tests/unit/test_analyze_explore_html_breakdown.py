"""HTML GPU-breakdown bars: communication that runs under compute is compute time already. The bar drew the
whole communication time next to compute, so with overlap the segments summed past 100% and ran off the plot
(trace_filter: 17.7% compute + 32.6% communication + 53.6% idle = 104%)."""

from __future__ import annotations

import json
import re
from xml.etree import ElementTree

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_html, render_json

pytestmark = pytest.mark.unit


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

"""The report of a rank driving two GPUs (per-device breakdown in text, JSON and HTML), and host-bound's fix when
the second GPU's CUDA start-up (its own module loading at each kernel's first launch there) is most of the wait."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from multigpu_trace_builder import MultiGpuTraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report.html import render_html
from dyno.trace_analysis.report.model import Breakdown, DeviceBreakdown
from dyno.trace_analysis.report.text import render_text
from dyno.trace_analysis.rules.host_bound import HostBound
from dyno.trace_analysis.rules.startup import STARTUP_FIX

pytestmark = pytest.mark.unit


def _pipeline(second: int) -> MultiGpuTraceBuilder:
    b = MultiGpuTraceBuilder(devices=(0, 1) if second else (0,))
    b.busy_on(0, 1000.0, 10)
    b.busy_on(second, 2000.0, 10)
    return b


def test_report_per_device_breakdown(tmp_path):
    report = analyze(_pipeline(1).write(tmp_path / "t.json"))
    bd = report.to_dict()["ranks"][0]["breakdown"]
    assert bd["idle_pct"] == pytest.approx(50.0)  # the pair: each GPU idles half the span
    assert [(d["device"], d["idle_pct"]) for d in bd["devices"]] == [(0, 50.0), (1, 50.0)]
    json.dumps(report.to_dict())  # serialisable
    text = render_text(report)
    assert "span, mean of 2 GPUs): idle 50.0%" in text
    assert "    GPU 0: idle 50.0%" in text and "    GPU 1: idle 50.0%" in text
    html = render_html(report)
    assert ">  GPU 1</text>" in html and ">rank 0</text>" in html
    timelines = report.ranks[0].timelines
    # both devices' utilization over the same window (the rank's GPU span)
    assert [t.device for t in timelines] == [0, 1] and timelines[0].edges_us == timelines[1].edges_us


def test_report_one_device_has_no_device_list(tmp_path):
    report = analyze(_pipeline(0).write(tmp_path / "t.json"))
    bd = report.to_dict()["ranks"][0]["breakdown"]
    assert "devices" not in bd and bd["idle_pct"] == pytest.approx(0.0)
    text = render_text(report)
    assert "mean of" not in text and "    GPU 0:" not in text


_NAMES = ("conv_a", "conv_b", "conv_c")


def _second_gpu_launches(warm: bool) -> MultiGpuTraceBuilder:
    """Three kernels first launched on GPU 0 (quick calls), then on GPU 1 each launched by a 3 ms call while
    GPU 1 waits. ``warm``: GPU 1 ran each of them once before, so the slow calls are not its first launches."""
    b = MultiGpuTraceBuilder()
    t = 1000.0
    for name in _NAMES:
        b.launch(name, t - 50.0, t, 100.0, device=0)
        t += 100.0
    if warm:
        for name in _NAMES:
            b.launch(name, t - 50.0, t, 20.0, device=1)
            t += 100.0
    t += 100.0
    for name in _NAMES:
        b.launch(name, t + 10.0, t + 3020.0, 20.0, dur=3000.0, device=1)  # called after GPU 1's previous kernel
        t += 3040.0
    return b


def _host_bound_gpu1(tmp_path: Path, warm: bool):
    report = analyze(_second_gpu_launches(warm).write(tmp_path / "t.json"), rules=["host-bound"])
    found = [f for f in report.findings if f.title.startswith("GPU 1 compute stream")]
    assert len(found) == 1
    return found[0]


def test_host_bound_second_gpu_startup_leads_with_warm_up(tmp_path):
    f = _host_bound_gpu1(tmp_path, warm=False)
    # GPU 1's first launches load the modules into its own context: start-up, once per process
    assert "is CUDA start-up in the trace (profile after warm-up)" in f.title
    assert f.evidence.counts["startup_share"] > 0.9
    assert f.fix.startswith(STARTUP_FIX.split("{")[0])  # warm-up advice first
    assert f.fix.index("warm-up") < f.fix.index("operator fusion") and f.fix.index("CUDA graphs") > 0


def test_host_bound_second_gpu_repeat_launches_keep_the_launch_fix(tmp_path):
    f = _host_bound_gpu1(tmp_path, warm=True)
    assert "start-up" not in f.title and "startup_share" not in f.evidence.counts
    assert f.fix == HostBound.fix  # fusion / CUDA graphs: the host launches too slowly


def test_a_devices_percents_are_100_x_over_the_span_as_written_before() -> None:
    """A device's `_pct` is 100 * x / span (the rank's own are 100 * (x / span)): the two round apart, and the JSON
    report keeps the numbers it wrote."""
    dv = DeviceBreakdown(device=1, idle_us=1.0, compute_us=2.0, non_compute_us=0.0, communication_us=0.0, memory_us=0.0)
    b = Breakdown(span_us=3.0, idle_us=1.0, compute_us=2.0, non_compute_us=0.0, communication_us=0.0, memory_us=0.0)
    assert dv.to_dict(3.0)["idle_pct"] == 100.0 * 1.0 / 3.0 == 33.333333333333336
    assert b.to_dict()["idle_pct"] == 100.0 * (1.0 / 3.0) != 100.0 * 1.0 / 3.0
    assert dv.to_dict(0.0)["idle_pct"] == 0.0

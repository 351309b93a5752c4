"""GPU-utilization timeline on a window only a few µs long on an epoch-µs clock (Kineto's ts ~1.7e15 µs, where
float64 steps by 0.25 µs): bins that collapse to zero width give no 0/0 (no numpy RuntimeWarning, no "nan" in the
HTML plot, no null in the JSON, a finite overall utilization)."""

from __future__ import annotations

import json
import warnings

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_html, render_json

pytestmark = pytest.mark.unit

T0 = 1.7e15  # µs since the epoch, as Kineto writes


def _tiny(tmp_path, kernels):
    b = TraceBuilder()
    for k_ts, k_dur in kernels:
        b.launch("k", T0 + k_ts - 3.0, T0 + k_ts, k_dur, dur=2.0)
    return b.write(tmp_path / "tiny.json")


def test_zero_width_bins_give_no_nan(tmp_path):
    path = _tiny(tmp_path, [(0.0, 5.0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the 0/0 RuntimeWarning
        report = analyze(path)
    (timeline,) = report.ranks[0].timelines
    assert all(0.0 <= u <= 1.0 for u in timeline.utilization)
    assert "nan" not in render_html(report).lower()
    doc = json.loads(render_json(report))
    assert None not in doc["ranks"][0]["gpu_utilization_timeline"][0]["utilization"]


def test_low_gpu_util_still_judges_a_tiny_window(tmp_path):
    # 1 µs of kernels in a 6 µs GPU span (30 chunks of 0.2 µs on a 0.25 µs grid): 17% busy, below the 50% default
    path = _tiny(tmp_path, [(0.0, 0.5), (5.5, 0.5)])
    (f,) = analyze(path, rules=["low-gpu-util"]).findings_of("low-gpu-util")
    assert f.evidence.counts["utilization"] == pytest.approx(1.0 / 6.0)
    assert all(e.dur_us > 0 for e in f.evidence.examples)  # a zero-width bin is no example of low utilization

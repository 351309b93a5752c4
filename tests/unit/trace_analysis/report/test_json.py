"""JSON evidence counts: a count is an integer ("copies": 2, as docs/ANALYSIS_REPORT.md shows), a time or share a
float, whatever its value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_html, render_json

pytestmark = pytest.mark.unit


def _report(tmp_path: Path) -> dict:
    b = TraceBuilder()
    b.busy_gpu(0.0, 20)
    b.memcpy("Memcpy HtoD (Pageable -> Device)", 3000.0, 3010.0, 50.0, nbytes=4096)
    b.memcpy("Memcpy HtoD (Pageable -> Device)", 3100.0, 3110.0, 50.0, nbytes=4096)
    report = analyze([b.write(tmp_path / "t.json")], rules=["pageable-memcpy", "launch-queue"])
    assert "copies=2" in render_html(report) and "bytes=8.0 KiB" in render_html(report)
    return json.loads(render_json(report))


def test_counts_are_integers(tmp_path: Path) -> None:
    (f,) = [f for f in _report(tmp_path)["findings"] if f["rule"] == "pageable-memcpy"]
    counts = f["evidence"]["counts"]
    assert counts == {"copies": 2, "bytes": 8192}
    assert all(type(v) is int for v in counts.values())


def test_times_and_shares_stay_floats(tmp_path: Path) -> None:
    for f in _report(tmp_path)["findings"]:
        ev = f["evidence"]
        assert type(ev["time_lost_us"]) is float  # 100.0 here: a whole number of µs is still a time
        for key, value in ev["counts"].items():
            if key.endswith("_us") or "share" in key or key.endswith("utilization"):
                assert type(value) is float, (f["rule"], key, value)


def test_non_finite_floats_are_null_and_keys_strings(tmp_path: Path) -> None:
    """JSON has no NaN/Infinity: any consumer must parse the document (Python's and numpy's floats; int keys)."""
    import math

    import msgspec
    import numpy as np

    b = TraceBuilder()
    b.busy_gpu(0.0, 5)
    report = analyze([b.write(tmp_path / "t.json")], rules=["launch-queue"])
    report = msgspec.structs.replace(
        report, meta={"nan": math.nan, "inf": np.float32("inf"), "a": np.array([1.0, -np.inf]), 7: {3: -math.inf}}
    )
    text = render_json(report)
    doc = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert doc["meta"] == {"nan": None, "inf": None, "a": [1.0, None], "7": {"3": None}}

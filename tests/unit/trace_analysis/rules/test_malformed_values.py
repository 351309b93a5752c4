"""deviceProperties with values that are not integers: the rules that read them treat the value as unknown
instead of raising (a rule error, with a traceback logged on the CLI's stderr)."""

from __future__ import annotations

import json

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze

pytestmark = pytest.mark.unit


def _gemm_trace(tmp_path, kernel="volta_sgemm_128x64_nn", **props):
    b = TraceBuilder()
    b.busy_gpu(0.0, 5, name=kernel)
    b.memory(10.0, 2**30)
    doc = b.to_json()
    doc["deviceProperties"][0].update(props)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    return path


def _outcome(report, rule_id):
    (o,) = [o for o in report.rules if o.rule_id == rule_id]
    return o


def test_non_numeric_compute_capability_is_unknown(tmp_path, caplog):
    # a kernel name without an architecture tag: nothing else tells the capability
    report = analyze(_gemm_trace(tmp_path, kernel="sgemm_128x64_nn", computeMajor="x"), rules=["no-tensor-cores"])
    o = _outcome(report, "no-tensor-cores")
    assert o.status == "skipped" and "capability unknown" in o.reason
    assert "Traceback" not in caplog.text


def test_non_numeric_compute_capability_falls_back_to_kernel_names(tmp_path, caplog):
    report = analyze(_gemm_trace(tmp_path, computeMajor="x"), rules=["no-tensor-cores"])
    (f,) = report.findings_of("no-tensor-cores")
    assert "compute-capability ≥7.0 GPU (from kernel names" in f.title
    assert "Traceback" not in caplog.text


def test_non_numeric_total_memory_is_unknown(tmp_path, caplog):
    report = analyze(_gemm_trace(tmp_path, totalGlobalMem="big"), rules=["memory-pressure"])
    o = _outcome(report, "memory-pressure")  # no capacity: nothing to compare the peak with, so no verdict
    assert o.status == "skipped" and "capacity unknown" in o.reason
    assert "Traceback" not in caplog.text


def test_numeric_strings_still_count(tmp_path):
    report = analyze(_gemm_trace(tmp_path, computeMajor="8", computeMinor="0"), rules=["no-tensor-cores"])
    (f,) = report.findings_of("no-tensor-cores")
    assert "8.0" in f.title

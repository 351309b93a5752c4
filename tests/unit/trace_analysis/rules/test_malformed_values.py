"""deviceProperties with values that are not integers: the rules that read them treat the value as unknown
instead of raising."""

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


# Rules that read recorded shapes treat a malformed 'Input Dims' / 'Input type' as unknown instead of raising.


@pytest.mark.parametrize("dims", [5, 1.5, "12", {"a": 1}])
def test_cpu_init_copy_with_malformed_dims(tmp_path, dims, caplog):
    b = TraceBuilder(record_shapes=True)
    b.cpu("aten::fill_", 0.0, 5.0, **{"Input Dims": dims})
    b.cpu("aten::to", 10.0, 5.0, **{"Input Dims": [[4, 4]]})
    report = analyze(b.write(tmp_path / "t.json"), rules=["cpu-init-copy"])
    assert [o.status for o in report.rules] == ["clean"]  # shapes unknown: no pair to match
    assert "Traceback" not in caplog.text


@pytest.mark.parametrize(
    ("dims", "types"),
    [(7, ["c10::Half", "c10::Half"]), ([["x", "y"], [64, 32]], ["c10::Half"]), ([[13, 64]], {"a": "c10::Half"})],
)
def test_unaligned_gemm_with_malformed_shapes(tmp_path, dims, types, caplog):
    b = TraceBuilder(record_shapes=True)
    b.cpu("aten::mm", 10.0, 30.0, **{"Input Dims": dims, "Input type": types})
    b.cpu("aten::mm", 50.0, 30.0, **{"Input Dims": [[13, 64], [64, 32]], "Input type": ["c10::Half", "c10::Half"]})
    report = analyze(b.write(tmp_path / "t.json"), rules=["unaligned-gemm"])
    (f,) = report.findings_of("unaligned-gemm")  # the well-formed call is still judged
    assert f.evidence.counts["matmuls"] == 1
    assert "Traceback" not in caplog.text


def test_unaligned_gemm_counts_a_linear_once(tmp_path):
    # aten::linear runs aten::addmm (2-D input) or aten::matmul -> aten::mm inside it: one GEMM, not 2-3
    # (6 bf16 Linear calls are 6 half-precision matmuls, with their host time counted once)
    b = TraceBuilder(record_shapes=True)
    half = ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"]
    for k in range(3):
        t = k * 100.0
        b.cpu("aten::linear", t, 50.0, **{"Input Dims": [[4, 13], [64, 13], [64]], "Input type": half})
        b.cpu("aten::t", t + 1.0, 2.0)
        b.cpu("aten::addmm", t + 5.0, 40.0, **{"Input Dims": [[64], [4, 13], [13, 64]], "Input type": half})
    b.cpu("aten::matmul", 400.0, 50.0, **{"Input Dims": [[2, 4, 13], [13, 64]], "Input type": half[:2]})
    b.cpu("aten::mm", 410.0, 30.0, **{"Input Dims": [[8, 13], [13, 64]], "Input type": half[:2]})
    report = analyze(b.write(tmp_path / "t.json"), rules=["unaligned-gemm"])
    (f,) = report.findings_of("unaligned-gemm")
    assert f.evidence.counts["matmuls"] == 4 and f.evidence.counts["host_time_us"] == 3 * 50.0 + 50.0

"""Rules that read recorded shapes treat a malformed 'Input Dims' / 'Input type' as unknown instead of raising
(the rule became an error, with a traceback logged on the CLI's stderr). Found by fuzzing a real trace."""

from __future__ import annotations

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze

pytestmark = pytest.mark.unit


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

"""On a CPU-only trace, findings about GPU costs are info (as sync-calls is): DataParallel without GPUs only calls
the module, and a half-precision matmul's tensor-core padding has no tensor cores to matter for. With GPU activity
they keep their severity."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.rules import Severity

pytestmark = pytest.mark.unit


def _trace(tmp_path: Path, gpu: bool) -> Path:
    b = TraceBuilder(record_shapes=True)
    if gpu:
        b.busy_gpu(0.0, 5)
    b.cpu("DataParallel.forward", 10.0, 100.0)
    b.cpu("aten::mm", 20.0, 30.0, **{"Input Dims": [[13, 64], [64, 32]], "Input type": ["c10::Half", "c10::Half"]})
    return b.write(tmp_path / ("gpu.json" if gpu else "cpu.json"))


def _one(path: Path, rule: str):
    (f,) = analyze([path], rules=[rule]).findings_of(rule)
    return f


@pytest.mark.parametrize(("rule", "on_gpu"), [("data-parallel", Severity.MEDIUM), ("unaligned-gemm", Severity.LOW)])
def test_cpu_only_is_info_gpu_keeps_severity(tmp_path: Path, rule: str, on_gpu: Severity) -> None:
    cpu = _one(_trace(tmp_path, gpu=False), rule)
    assert cpu.severity is Severity.INFO and "CPU-only trace" in cpu.title
    gpu = _one(_trace(tmp_path, gpu=True), rule)
    assert gpu.severity is on_gpu and "CPU-only" not in gpu.title

"""A finding's title names the window its share is of. low-gpu-util divides by the device's GPU span when the
trace has no steps (HTA's span) but its title said "of the trace span": alexnet's GPU is busy 0.5% of its GPU span
(13 s), not of the 43 s trace span."""

from __future__ import annotations

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze

pytestmark = pytest.mark.unit


def _idle_gpu(steps: bool) -> TraceBuilder:
    b = TraceBuilder()
    b.cpu("aten::empty", 0.0, 10.0)  # the trace starts 100 ms before the GPU work
    if steps:
        for i in range(2):
            b.step(i, 100_000.0 + i * 10_000.0, 10_000.0)
    for i in range(20):  # 20 µs kernels every 1 ms: 2% busy
        b.launch("k", 100_000.0 + i * 1000.0, 100_010.0 + i * 1000.0, 20.0)
    return b


@pytest.mark.parametrize(("steps", "window"), [(True, "the 2 profiler steps"), (False, "its GPU span")])
def test_low_gpu_util_title_names_its_window(tmp_path, steps, window):
    (f,) = analyze(_idle_gpu(steps).write(tmp_path / "t.json"), rules=["low-gpu-util"]).findings_of("low-gpu-util")
    assert f"% of {window} " in f.title, f.title
    assert f.evidence.share == pytest.approx(1.0 - f.evidence.counts["utilization"])

"""host-bound / launch-overhead titles name the window their share is of: the profiler steps when the trace
has them (the denominator then), not always "the GPU span"."""

from __future__ import annotations

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze

pytestmark = pytest.mark.unit


def _trace(tmp_path, steps: bool, gap: float):
    b = TraceBuilder()
    if steps:
        for i in range(2):
            b.step(i, i * 5_000.0, 5_000.0)
    t = 0.0
    for _ in range(100):  # each kernel launched after the previous one ended (host_wait), or queued (kernel_wait)
        b.launch("small_kernel", t if gap > 30 else 0.0, t + 6.0, 4.0, dur=5.0)
        t += 4.0 + gap
    return b.write(tmp_path / "t.json")


@pytest.mark.parametrize(("rule", "gap"), [("host-bound", 96.0), ("launch-overhead", 10.0)])
def test_title_names_the_window(tmp_path, rule, gap):
    (f,) = analyze(_trace(tmp_path, True, gap), rules=[rule]).findings_of(rule)
    assert f.title.endswith("of the 2 profiler steps"), f.title
    (f,) = analyze(_trace(tmp_path, False, gap), rules=[rule]).findings_of(rule)
    assert f.title.endswith("of the GPU span"), f.title

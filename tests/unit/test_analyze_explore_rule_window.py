"""Rules count only what happens inside the analysed window (the profiler steps when the trace has them), as
the share they report is of that window. pageable-memcpy, sync-memcpy, sync-memset, optimizer and
cpu-init-copy counted the whole trace: a 500 ms pageable upload before a 2 ms window was "25000% of window"."""

from __future__ import annotations

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze

pytestmark = pytest.mark.unit

T0 = 1_000_000.0  # the window: two 1 ms steps from here; the "before" events happen at 0..1000 µs


def _steps(**kw) -> TraceBuilder:
    b = TraceBuilder(**kw)
    for i in range(2):
        b.step(i, T0 + i * 1000.0, 1000.0)
    b.busy_gpu(T0, 15)
    return b


def _one(b: TraceBuilder, tmp_path, rule: str):
    report = analyze(b.write(tmp_path / "t.json"), rules=[rule])
    (f,) = report.findings_of(rule)
    assert f.evidence.share is not None and f.evidence.share <= 1.0
    return f


def test_pageable_memcpy(tmp_path):
    b = _steps()
    b.memcpy("Memcpy HtoD (Pageable -> Device)", 0.0, 10.0, 500_000.0, nbytes=1 << 30)  # before the steps
    b.memcpy("Memcpy HtoD (Pageable -> Device)", T0 + 100.0, T0 + 1600.0, 50.0, nbytes=1 << 20)
    f = _one(b, tmp_path, "pageable-memcpy")
    assert f.evidence.counts["copies"] == 1 and f.evidence.time_lost_us == 50.0


@pytest.mark.parametrize(("rule", "call"), [("sync-memcpy", "cudaMemcpy"), ("sync-memset", "cudaMemset")])
def test_sync_memcpy_and_memset(tmp_path, rule, call):
    b = _steps()
    b.runtime(call, 100.0, 400_000.0)
    b.runtime(call, T0 + 200.0, 30.0)
    f = _one(b, tmp_path, rule)
    assert f.evidence.counts["calls"] == 1 and f.evidence.time_lost_us == 30.0


def test_optimizer(tmp_path):
    b = _steps()
    for start in (0.0, T0 + 500.0, T0 + 1500.0):  # one step before the window, two inside
        b.cpu("Optimizer.step#SGD.step", start, 100.0)
        for k in range(4):
            b.cpu("aten::add_", start + 10.0 + 20.0 * k, 5.0)
        b.cpu("Optimizer.zero_grad#SGD.zero_grad", start + 200.0, 50.0)
        b.cpu("aten::zero_", start + 210.0, 10.0)
    report = analyze(b.write(tmp_path / "t.json"), rules=["optimizer"])
    single, zero = report.findings_of("optimizer")
    assert single.evidence.counts["optimizer_steps"] == 2 and single.evidence.time_lost_us == 200.0
    assert zero.evidence.counts["zero_calls"] == 2 and zero.evidence.counts["zero_grad_calls"] == 2


def test_cpu_init_copy(tmp_path):
    b = TraceBuilder(capability=None)  # CPU-only
    for i in range(2):
        b.step(i, T0 + i * 1000.0, 1000.0)
    for start in (0.0, T0 + 100.0):
        b.cpu("aten::zeros", start, 20.0)
        b.cpu("aten::to", start + 30.0, 10.0)
    f = _one(b, tmp_path, "cpu-init-copy")
    assert f.evidence.counts["copies"] == 1

"""GPU-side rules (host-bound, launch-overhead, short-kernels, slow-runtime-calls, exposed-comm) count GPU work
inside the window whose share they report: the profiler steps, first step's start to last step's end (the shared
analyses follow HTA's GPU scope, which ends at the last step's *start*)."""

from __future__ import annotations

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze

pytestmark = pytest.mark.unit

T0 = 1_000_000.0  # the window: two 1 ms steps [T0, T0 + 2000); "before" work happens at 0..500 ms
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float"


def _steps(busy_first_step: bool = True) -> TraceBuilder:
    b = TraceBuilder()
    for i in range(2):
        b.step(i, T0 + i * 1000.0, 1000.0)
    if busy_first_step:
        b.busy_gpu(T0, 10)  # step 0: 10 back-to-back 100 µs kernels, queued ahead
    return b


def _host_bound_kernels(b: TraceBuilder, t: float, n: int, every: float = 100.0) -> None:
    """n 4 µs kernels, each launched (5 µs call) only after the previous one finished: host_wait gaps."""
    for _ in range(n):
        b.launch("small_kernel", t, t + 6.0, 4.0, dur=5.0)
        t += every


def _one(b: TraceBuilder, tmp_path, rule: str):
    report = analyze(b.write(tmp_path / "t.json"), rules=[rule])
    found = report.findings_of(rule)
    for f in found:
        assert f.evidence.share is not None and 0.0 <= f.evidence.share <= 1.0, f.title
    return found


def test_host_bound_counts_the_window_only(tmp_path):
    b = _steps()
    _host_bound_kernels(b, 0.0, 100)  # before the steps: 100 host-bound kernels (and a ~1 s host_wait to T0)
    _host_bound_kernels(b, T0 + 1000.0, 10)  # the last step: 9 host_wait gaps of 96 µs
    (f,) = _one(b, tmp_path, "host-bound")
    assert f.evidence.time_lost_us == pytest.approx(9 * 96.0)
    assert f.evidence.share == pytest.approx(9 * 96.0 / 2000.0)
    assert f.evidence.counts["host_wait_gaps"] == 9
    assert all(T0 <= e.ts_us < T0 + 2000.0 for e in f.evidence.examples)


def test_host_bound_before_the_steps_is_not_the_loops_cost(tmp_path):
    b = _steps()
    b.busy_gpu(T0 + 1000.0, 10)  # both steps busy
    _host_bound_kernels(b, 0.0, 100)
    assert _one(b, tmp_path, "host-bound") == []


def test_launch_overhead_counts_the_window_only(tmp_path):
    b = _steps()
    for i in range(100):  # before the steps: 99 queued kernels with 20 µs gaps
        b.launch("k", i * 1.0, 1000.0 + i * 120.0, 100.0, dur=0.5)
    for i in range(8):  # the last step: 7 gaps of 20 µs = 7% of the window
        b.launch("k", T0 + 1000.0 + i, T0 + 1000.0 + i * 120.0, 100.0, dur=0.5)
    (f,) = _one(b, tmp_path, "launch-overhead")
    assert f.evidence.counts["gaps"] == 7
    assert f.evidence.time_lost_us == pytest.approx(140.0)


def test_short_kernels_counts_launches_in_the_window(tmp_path):
    b = _steps()
    _host_bound_kernels(b, 0.0, 100)  # 100 short kernels before the steps
    _host_bound_kernels(b, T0 + 1000.0, 30, every=30.0)  # 30 in the last step, beside step 0's 10 long ones
    (f,) = _one(b, tmp_path, "short-kernels")
    assert f.evidence.counts["short_kernels"] == 30 and f.evidence.counts["launches"] == 40
    assert f.evidence.time_lost_us == pytest.approx(30 * 5.0)


def test_short_kernels_before_the_steps_are_not_counted(tmp_path):
    b = _steps()
    _host_bound_kernels(b, 0.0, 100)
    assert _one(b, tmp_path, "short-kernels") == []


def test_slow_runtime_calls_counts_calls_in_the_window(tmp_path):
    b = _steps()
    for i in range(5):  # 10 ms launch calls before the steps
        b.launch("k", i * 20_000.0, i * 20_000.0 + 10_010.0, 5.0, dur=10_000.0)
    b.launch("k", T0 + 1100.0, T0 + 1400.0, 5.0, dur=250.0)  # one in the last step
    (f,) = _one(b, tmp_path, "slow-runtime-calls")
    assert f.evidence.counts["slow_calls"] == 1
    assert f.evidence.time_lost_us == pytest.approx(200.0)


def test_exposed_comm_before_the_steps_is_not_counted(tmp_path):
    b = _steps()
    b.busy_gpu(T0 + 1000.0, 10)
    b.launch(NCCL, 0.0, 10.0, 500_000.0, stream=20)  # 500 ms of NCCL alone, all before the first step
    assert _one(b, tmp_path, "exposed-comm") == []


def test_exposed_comm_counts_the_window_and_its_last_step(tmp_path):
    b = _steps()
    b.launch(NCCL, 0.0, 10.0, 500_000.0, stream=20)
    b.launch(NCCL, T0 + 1100.0, T0 + 1100.0, 500.0, stream=20)  # the last step: 500 µs alone = 25% of the window
    (f,) = _one(b, tmp_path, "exposed-comm")
    assert f.evidence.time_lost_us == pytest.approx(500.0)
    assert f.evidence.share == pytest.approx(0.25)
    assert f.evidence.counts["kernels"] == 1
    assert "25.0% of the 2 profiler steps" in f.title


def test_exposed_comm_counts_kernels_without_a_launch_call(tmp_path):
    # NCCL kernels launched before the profiler's CPU events begin have no runtime row in the trace; they run in
    # the window all the same, and low-gpu-util counts them as GPU time: exposed-comm must too
    b = _steps()
    b.launch(NCCL, T0 + 1100.0, T0 + 1100.0, 300.0, stream=20)
    b.gpu("kernel", NCCL, T0 + 1500.0, 200.0, corr=999_999, stream=21)  # its launch is not in the trace
    (f,) = _one(b, tmp_path, "exposed-comm")
    assert f.evidence.time_lost_us == pytest.approx(500.0)
    assert f.evidence.counts["kernels"] == 2
    (util,) = analyze(b.write(tmp_path / "u.json"), rules=["low-gpu-util"]).findings_of("low-gpu-util")
    busy = 1000.0 + 300.0 + 200.0  # the same kernels as busy GPU time
    assert util.evidence.counts["idle_us"] == pytest.approx(2000.0 - busy)


# Rules count only what happens inside the analysed window (the profiler steps when the trace has them), as the share
# they report is of that window


def _window_steps(**kw) -> TraceBuilder:
    b = TraceBuilder(**kw)
    for i in range(2):
        b.step(i, T0 + i * 1000.0, 1000.0)
    b.busy_gpu(T0, 15)
    return b


def _one_in_window(b: TraceBuilder, tmp_path, rule: str):
    report = analyze(b.write(tmp_path / "t.json"), rules=[rule])
    (f,) = report.findings_of(rule)
    assert f.evidence.share is not None and f.evidence.share <= 1.0
    return f


def test_pageable_memcpy(tmp_path):
    b = _window_steps()
    b.memcpy("Memcpy HtoD (Pageable -> Device)", 0.0, 10.0, 500_000.0, nbytes=1 << 30)  # before the steps
    b.memcpy("Memcpy HtoD (Pageable -> Device)", T0 + 100.0, T0 + 1600.0, 50.0, nbytes=1 << 20)
    f = _one_in_window(b, tmp_path, "pageable-memcpy")
    assert f.evidence.counts["copies"] == 1 and f.evidence.time_lost_us == 50.0


@pytest.mark.parametrize(("rule", "call"), [("sync-memcpy", "cudaMemcpy"), ("sync-memset", "cudaMemset")])
def test_sync_memcpy_and_memset(tmp_path, rule, call):
    b = _window_steps()
    b.runtime(call, 100.0, 400_000.0)
    b.runtime(call, T0 + 200.0, 30.0)
    f = _one_in_window(b, tmp_path, rule)
    assert f.evidence.counts["calls"] == 1 and f.evidence.time_lost_us == 30.0


def test_optimizer(tmp_path):
    b = _window_steps()
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
    f = _one_in_window(b, tmp_path, "cpu-init-copy")
    assert f.evidence.counts["copies"] == 1


# gpu-starvation counts GPU idle time inside the analysed window only, as every other rule's time lost


def _trace(tmp_path, busy_until_us: float, late_us: float):
    b = TraceBuilder()
    for i in range(2):
        b.step(i, i * 500_000.0, 500_000.0)  # window: [0, 1 s)
    t = 0.0
    while t < busy_until_us:
        b.launch("k", t, t + 10.0, 1000.0)
        t += 1000.0
    b.launch("late", late_us, late_us + 10.0, 100.0)
    return b.write(tmp_path / "t.json")


def test_idle_after_the_window_is_not_starvation(tmp_path):
    report = analyze(_trace(tmp_path, 1_000_000.0, 2_500_000.0), rules=["gpu-starvation"])
    assert report.findings_of("gpu-starvation") == []


def test_gap_crossing_the_window_end_counts_its_part_inside(tmp_path):
    report = analyze(_trace(tmp_path, 200_000.0, 2_500_000.0), rules=["gpu-starvation"])
    (f,) = report.findings_of("gpu-starvation")
    assert f.evidence.time_lost_us == pytest.approx(1_000_000.0 - 200_010.0)
    assert f.evidence.share == pytest.approx(0.79999, abs=1e-4) and f.evidence.share <= 1.0
    assert f.evidence.examples[0].ts_us == pytest.approx(200_010.0)


# host-bound / launch-overhead titles name the window their share is of


def _title_trace(tmp_path, steps: bool, gap: float):
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
    (f,) = analyze(_title_trace(tmp_path, True, gap), rules=[rule]).findings_of(rule)
    assert f.title.endswith("of the 2 profiler steps"), f.title
    (f,) = analyze(_title_trace(tmp_path, False, gap), rules=[rule]).findings_of(rule)
    assert f.title.endswith("of the GPU span"), f.title


# A finding's title names the window its share is of


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

"""CUDA start-up in a trace (rules/startup.py) and how the GPU-idle rules report it.

A trace taken from the program's start holds the CUDA start-up (context creation, library initialisation, lazy
module loading at first launches). low-gpu-util, gpu-starvation and host-bound say how much of their idle time is
start-up, fix warm-up first and rate the rest."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.loader import load_trace
from dyno.trace_analysis.rules import launch, startup
from dyno.trace_analysis.rules.base import Severity
from dyno.trace_analysis.rules.context import RuleContext
from dyno.trace_analysis.rules.startup import STARTUP_MIN_CALL_US, startup_calls

from conftest import SHARED_TRACES

pytestmark = pytest.mark.unit

IDLE_RULES = ["low-gpu-util", "gpu-starvation", "host-bound"]
S = 1_000_000.0  # µs


def _startup_trace(
    *, free_us: float = 2 * S, launch_us: float = 1 * S, steady_gap_us: float = 0.0, first: bool = True
) -> TraceBuilder:
    """5 kernels, then the host in a cudaFree (``free_us``) and a launch call (``launch_us``) while the GPU idles,
    then (``steady_gap_us``) a gap the host spends in Python, then more kernels. ``first``: the cudaFree is the
    trace's first and the launch its kernel's first (start-up); else both were called before (not start-up)."""
    b = TraceBuilder()
    t = 0.0
    if not first:
        b.runtime("cudaFree", t, 20.0)
        b.launch("conv_kernel", t + 30.0, t + 40.0, 100.0)
        t = 200.0
    t = b.busy_gpu(t, 5)
    b.runtime("cudaFree", t + 100.0, free_us)
    call = t + 200.0 + free_us
    k = call + launch_us + 100.0
    b.launch("conv_kernel", call, k, 100.0, dur=launch_us)
    t = k + 100.0
    if steady_gap_us:
        b.cpu("python_work", t + 10.0, steady_gap_us)
        b.launch("compute_kernel", t + steady_gap_us + 20.0, t + steady_gap_us + 30.0, 100.0)
        t += steady_gap_us + 130.0
    b.busy_gpu(t, 5)
    return b


def _findings(tmp_path: Path, b: TraceBuilder, **thresholds: float) -> dict[str, object]:
    report = analyze(b.write(tmp_path / "t.json"), rules=IDLE_RULES, thresholds=thresholds or None)
    return {f.rule_id: f for f in report.findings}


def _ctx(tmp_path: Path, b: TraceBuilder) -> RuleContext:
    return RuleContext(load_trace(b.write(tmp_path / "t.json")))


# ---- the measure ---------------------------------------------------------------------------------------------


def test_first_init_call_and_first_launch_are_startup(tmp_path):
    ctx = _ctx(tmp_path, _startup_trace())
    calls = startup_calls(ctx)
    names = [ctx.trace.strings[int(i)] for i in ctx.trace.events.name[calls.rows]]
    assert names == ["cudaFree", "cudaLaunchKernel"]
    assert calls.host_us == pytest.approx(3 * S)
    assert startup_calls(ctx) is calls  # cached: every rule asks the same


def test_calls_made_before_are_not_startup(tmp_path):
    # the same 2 s cudaFree and 1 s launch, but neither is the first of its kind in the trace
    ctx = _ctx(tmp_path, _startup_trace(first=False))
    assert startup_calls(ctx).rows.shape[0] == 0


def test_short_first_calls_are_not_startup(tmp_path):
    # first calls of steady-state traces take µs (the shared ones: < 0.1 ms)
    ctx = _ctx(tmp_path, _startup_trace(free_us=STARTUP_MIN_CALL_US / 2, launch_us=STARTUP_MIN_CALL_US / 2))
    assert startup_calls(ctx).rows.shape[0] == 0


def test_other_long_first_calls_are_not_startup(tmp_path):
    # a first cudaMalloc costs what later ones cost (the shared traces: 7.2 ms, then 2-9 ms): not initialisation
    b = TraceBuilder()
    t = b.busy_gpu(0.0, 5)
    b.runtime("cudaMalloc", t + 100.0, 2 * S)
    b.busy_gpu(t + 2 * S + 200.0, 5)
    assert startup_calls(_ctx(tmp_path, b)).rows.shape[0] == 0


def test_startup_idle_leaves_out_busy_gpu_time(tmp_path):
    # a 2 ms first launch while the GPU runs a 10 ms kernel: start-up host time, but no GPU idle during it
    b = TraceBuilder()
    b.launch("long_kernel", 0.0, 10.0, 10_000.0)
    b.launch("new_kernel", 100.0, 10_100.0, 100.0, dur=2_000.0)
    ctx = _ctx(tmp_path, b)
    calls = startup_calls(ctx)
    assert calls.host_us == pytest.approx(2_000.0)
    (s, e, first, last) = ctx.device_busy[0]
    assert calls.idle_in(s, e, first, last) == 0.0
    assert calls.overlap(np.array([0.0]), np.array([1_100.0])) == pytest.approx(1_000.0)


def test_slow_runtime_calls_uses_the_same_first_launch_test():
    assert launch.first_kernel_launches is startup.first_kernel_launches


# ---- the rules -----------------------------------------------------------------------------------------------


def test_startup_idle_is_named_fixed_first_and_rated_on_the_rest(tmp_path):
    got = _findings(tmp_path, _startup_trace())
    assert set(got) == set(IDLE_RULES)
    for f in got.values():
        assert "is CUDA start-up in the trace" in f.title
        assert f.fix.startswith("This trace includes CUDA start-up (3.00 s")
        assert "CUDA_MODULE_LOADING=EAGER" in f.fix and "--iterations" in f.fix
        counts = f.evidence.counts
        assert counts["startup_calls"] == 2
        assert counts["startup_share"] > 0.99
        assert counts["startup_us"] == pytest.approx(f.evidence.time_lost_us * counts["startup_share"])
        # the idle time stays the time lost (it is in the trace); the severity rests on the rest: ~300 µs
        assert f.evidence.time_lost_us > 2.9 * S
        assert f.severity is Severity.LOW
    # the rule's own fix is kept after the warm-up one
    assert "operator fusion" in got["host-bound"].fix
    assert "DataLoader workers" in got["low-gpu-util"].fix
    assert "move it off the training thread" in got["gpu-starvation"].fix


def test_steady_idle_beside_startup_keeps_its_severity(tmp_path):
    # 3 s of start-up and a 1.5 s Python gap: 67% start-up, the rest ~33% of the GPU span (high)
    got = _findings(tmp_path, _startup_trace(steady_gap_us=1.5 * S))
    low = got["low-gpu-util"]
    assert "is CUDA start-up" in low.title
    assert 0.6 < low.evidence.counts["startup_share"] < 0.7
    assert low.severity is Severity.HIGH
    assert got["host-bound"].severity is Severity.HIGH


def test_without_startup_nothing_changes(tmp_path):
    got = _findings(tmp_path, _startup_trace(first=False))
    assert set(got) == set(IDLE_RULES)
    for f in got.values():
        assert "start-up" not in f.title and "start-up" not in f.fix
        assert not any(k.startswith("startup") for k in f.evidence.counts)
    assert got["low-gpu-util"].severity is Severity.HIGH


def test_share_below_the_threshold_is_recorded_but_not_named(tmp_path):
    b = _startup_trace(steady_gap_us=1.5 * S)  # 67% start-up
    got = _findings(
        tmp_path,
        b,
        **{"low-gpu-util.min_startup_share": 0.8, "host-bound.min_startup_share": 0.8},
    )
    for rule in ("low-gpu-util", "host-bound"):
        f = got[rule]
        assert "start-up" not in f.title and not f.fix.startswith("This trace includes")
        assert 0.6 < f.evidence.counts["startup_share"] < 0.7  # recorded all the same
    assert "is CUDA start-up" in got["gpu-starvation"].title  # its own threshold, left at 0.5


# ---- the shared traces -----------------------------------------------------------------------------------------

SHARED = SHARED_TRACES
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared GPU traces not found at {SHARED}")


@needs_shared
@pytest.mark.parametrize("name", ["alexnet", "simple_add"])
def test_shared_startup_traces_say_start_up(name):
    report = analyze(SHARED / name)
    by_rule = {f.rule_id: f for f in report.findings}
    # issue 4's outcomes stay
    assert "sync-calls" in by_rule and ("low-gpu-util" in by_rule or "gpu-starvation" in by_rule)
    for rule in IDLE_RULES:
        f = by_rule[rule]
        assert "is CUDA start-up in the trace" in f.title, f.title
        assert f.fix.startswith("This trace includes CUDA start-up")
        assert f.evidence.counts["startup_share"] >= 0.5
    # context creation, cuDNN's initialisation and the first launch of its 3-4 s kernel
    (path,) = sorted((SHARED / name).glob("*.json.gz"))
    ctx = RuleContext(load_trace(path))
    names = {ctx.trace.strings[int(i)] for i in ctx.trace.events.name[startup_calls(ctx).rows]}
    assert {"cudaDeviceGetStreamPriorityRange", "cudaStreamCreateWithFlags", "cudaFree", "cudaLaunchKernel"} <= names
    assert "cudaMalloc" not in names


@needs_shared
@pytest.mark.parametrize(
    "name", ["negative_queue_length_values_check", "ns_resolution_trace", "nccl_parser_config", "trace_filter"]
)
def test_shared_steady_traces_have_no_startup(name):
    for path in sorted((SHARED / name).glob("*.json.gz")):
        assert startup_calls(RuleContext(load_trace(path))).rows.shape[0] == 0, path

"""tiny-ops: a Python loop of many tiny tensor ops per step is named, with its loop time, on a real torch CPU
trace and on builder traces (CPU-only and GPU: what it costs when the GPU waits for the host, nothing when the
host runs ahead)."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.rules.base import Severity
from dyno.trace_analysis.rules.op_overhead import TinyOps

pytestmark = pytest.mark.unit


def _torch_trace(path: Path, loop: bool) -> Path:
    """3 profiled steps of a real torch CPU run: ``loop`` updates a tensor with 600 x (mul, add) per step (1,200
    tiny ops), else the same result in 2 vectorized ops."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule

    x = torch.randn(64, 64)
    scale, shift = 1.0001**600, 0.1 * sum(1.0001**k for k in range(600))
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=3, repeat=1)) as prof:
        for _ in range(4):
            y = x
            if loop:
                for _ in range(600):
                    y = y * 1.0001 + 0.1
            else:
                y = y * scale + shift
            y.sum()
            prof.step()
    prof.export_chrome_trace(str(path))
    return path


def test_real_torch_loop_of_tiny_ops_is_named(tmp_path: Path) -> None:
    # the op count is the trace's; an op's duration and the loop's share depend on the machine's load (tests
    # assert no timing; a loaded machine can stall one op past 100 ms): those two thresholds are opened, the count
    # threshold stays the default
    loose = {"tiny-ops.max_op_us": 1e9, "tiny-ops.min_share": 0.0}
    report = analyze(_torch_trace(tmp_path / "loop.json", loop=True), thresholds=loose)
    (f,) = report.findings_of("tiny-ops")
    c = f.evidence.counts
    assert c["tiny_ops_per_step"] == 1201  # 600 x (mul, add) + the sum; their nested ops are not counted
    assert f.evidence.time_lost_us == pytest.approx(c["ops_us"] + c["python_between_us"])
    assert "aten::mul ×600" in f.title and "aten::add ×600" in f.title and "aten::sum ×1" in f.title
    assert "tiny CPU ops per step" in f.title
    assert "torch.compile" in f.fix and "vectorize" in f.fix and "CUDA graphs" in f.fix
    assert f.evidence.time_lost_basis == TinyOps.basis_cpu
    assert f.evidence.examples[0].name == "first tiny op of the loop: aten::mul"


def test_real_torch_vectorized_step_is_clean(tmp_path: Path) -> None:
    loose = {"tiny-ops.max_op_us": 1e9, "tiny-ops.min_share": 0.0}  # clean by its op count alone
    report = analyze(_torch_trace(tmp_path / "vec.json", loop=False), thresholds=loose)
    assert report.findings_of("tiny-ops") == []
    assert any(o.rule_id == "tiny-ops" and o.status == "clean" for o in report.rules)


def _loop(b: TraceBuilder, t0: float, n: int, op_us: float = 3.0, python_us: float = 5.0) -> float:
    """n top-level tiny ops (each with a nested aten::empty, not counted) from t0; returns the end."""
    t = t0
    for i in range(n):
        name = "aten::add" if i % 2 else "aten::mul"
        b.cpu(name, t, op_us)
        b.cpu("aten::empty", t + 0.5, 1.0)
        t += op_us + python_us
    return t


def test_builder_cpu_loop(tmp_path: Path) -> None:
    b = TraceBuilder(capability=None)
    for s in range(2):
        t0 = s * 10_000.0
        b.step(s, t0, 10_000.0)
        _loop(b, t0 + 100.0, 1000)  # 1000 x 8 µs = 8 ms of the 10 ms step
    (f,) = analyze(b.write(tmp_path / "t.json"), rules=["tiny-ops"]).findings_of("tiny-ops")
    assert f.evidence.counts["tiny_ops_per_step"] == 1000 and f.evidence.counts["top_level_ops"] == 2000
    assert f.evidence.counts["ops_us"] == pytest.approx(2000 * 3.0)
    assert f.evidence.counts["python_between_us"] == pytest.approx(2 * 999 * 5.0)
    assert f.evidence.share == pytest.approx((6000.0 + 9990.0) / 20_000.0)


def test_builder_below_the_ops_per_step_threshold(tmp_path: Path) -> None:
    b = TraceBuilder(capability=None)
    b.step(0, 0.0, 5000.0)
    _loop(b, 100.0, 400)  # 400 ops: under min_ops_per_step=500, though 64% of the step
    report = analyze(b.write(tmp_path / "t.json"), rules=["tiny-ops"])
    assert report.findings_of("tiny-ops") == []
    low = analyze(b.write(tmp_path / "t.json"), rules=["tiny-ops"], thresholds={"tiny-ops.min_ops_per_step": 400})
    assert len(low.findings_of("tiny-ops")) == 1


def test_builder_gpu_waiting_for_the_loop(tmp_path: Path) -> None:
    # the loop runs between kernel launches: the GPU's compute stream waits for the host 8 ms
    b = TraceBuilder()
    b.step(0, 0.0, 10_000.0)
    b.launch("compute_kernel", 10.0, 20.0, 50.0)
    end = _loop(b, 100.0, 1000)
    b.launch("compute_kernel", end, end + 10.0, 50.0)
    (f,) = analyze(b.write(tmp_path / "t.json"), rules=["tiny-ops"]).findings_of("tiny-ops")
    host_wait = f.evidence.counts["compute_stream_host_wait_us"]
    assert host_wait == pytest.approx(end + 10.0 - 70.0)
    assert f.evidence.time_lost_us == pytest.approx(min(host_wait, f.evidence.counts["loop_us"]))
    assert f.evidence.time_lost_basis == TinyOps.basis_gpu and f.severity is Severity.HIGH


def test_builder_gpu_bound_loop_costs_nothing(tmp_path: Path) -> None:
    # the same loop while the GPU works through queued kernels: the overhead is hidden
    b = TraceBuilder()
    b.step(0, 0.0, 10_000.0)
    b.busy_gpu(0.0, 100)  # 100 x 100 µs launched at the start, back to back
    _loop(b, 1000.0, 1000)
    (f,) = analyze(b.write(tmp_path / "t.json"), rules=["tiny-ops"]).findings_of("tiny-ops")
    assert f.evidence.time_lost_us == 0.0 and f.severity is Severity.INFO
    assert f.evidence.no_time_lost_reason is not None and "hidden" in f.evidence.no_time_lost_reason

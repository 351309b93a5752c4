"""trace_analysis.analyses on small synthetic traces with known answers."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from dyno.trace_analysis.analyses import (
    comm_comp_overlap,
    cpu_op_summary,
    idle_time_breakdown,
    kernel_breakdown,
    launch_stats,
    memory_copies,
    queue_length,
    rank_spread,
    step_timings,
    temporal_breakdown,
)
from dyno.trace_analysis.analyses.intervals import intersection_length, merge, union_length
from dyno.trace_analysis.loader import load_trace
from dyno.trace_analysis.model import MultiRankTrace, Trace

pytestmark = pytest.mark.unit


class _T:
    """Minimal event list builder (Kineto shapes)."""

    def __init__(self) -> None:
        self.ev: list[dict[str, Any]] = []
        self.corr = 0

    def x(self, cat: str, name: str, ts: float, dur: float, pid: int = 1, tid: int = 1, **args: Any) -> None:
        self.ev.append(
            {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}
        )

    def launch(
        self,
        name: str,
        ts: float,
        dur: float,
        k_ts: float,
        k_dur: float,
        stream: int = 7,
        cat: str = "kernel",
        call: str = "cudaLaunchKernel",
        **kargs: Any,
    ) -> None:
        self.corr += 1
        self.x("cuda_runtime", call, ts, dur, correlation=self.corr)
        self.x(cat, name, k_ts, k_dur, pid=0, tid=stream, correlation=self.corr, stream=stream, device=0, **kargs)

    def trace(self, rank: int = 0) -> Trace:
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / f"rank{rank}.json"
            p.write_bytes(orjson.dumps({"distributedInfo": {"rank": rank}, "traceEvents": self.ev}))
            return load_trace(p)


def test_intervals() -> None:
    s, e = merge(np.array([5.0, 0.0, 1.0, 10.0]), np.array([6.0, 2.0, 3.0, 12.0]))
    assert s.tolist() == [0.0, 5.0, 10.0] and e.tolist() == [3.0, 6.0, 12.0]
    assert union_length(np.array([0.0, 3.0]), np.array([3.0, 4.0])) == 4.0  # touching merge
    a = (np.array([0.0, 10.0]), np.array([5.0, 20.0]))
    b = (np.array([4.0, 12.0]), np.array([11.0, 13.0]))
    assert intersection_length(*a, *b) == pytest.approx(1 + 1 + 1)


def _gpu_trace() -> Trace:
    t = _T()
    t.launch("gemm_kernel", 0, 5, 10, 20)  # compute 10..30
    t.launch("ncclKernel_AllReduce_RING", 6, 5, 20, 30, stream=20)  # comm 20..50, overlaps compute 20..30
    t.launch(
        "Memcpy HtoD (Pageable -> Device)", 12, 5, 60, 10, cat="gpu_memcpy", call="cudaMemcpyAsync", bytes=10_000
    )  # memory 60..70
    t.launch("gemm_kernel", 80, 5, 95, 5)  # host late: launched at 80 > previous end 30 on stream 7
    t.launch("tiny_kernel", 86, 10, 101, 1)  # kernel_wait gap of 1 µs
    return t.trace()


def test_temporal_overlap_and_kernels() -> None:
    tr = _gpu_trace()
    tb = temporal_breakdown(tr)
    assert tb.span_us == 92 and tb.busy_us == 40 + 10 + 5 + 1  # 10..50, 60..70, 95..100, 101..102
    assert tb.compute_us == 20 + 5 + 1 and tb.communication_us == 30 and tb.memory_us == 10
    assert tb.idle_share == pytest.approx((92 - 56) / 92)
    ov = comm_comp_overlap(tr)
    assert ov.overlap_us == 10 and ov.overlap_share == pytest.approx(10 / 30) and ov.exposed_communication_us == 20
    kb = kernel_breakdown(tr, top_n=2)
    assert kb.top[0].name.startswith("ncclKernel") and kb.top[1].name == "gemm_kernel" and kb.top[1].count == 2
    assert {k.kernel_type: k.count for k in kb.by_type} == {
        "COMMUNICATION": 1,
        "MEMORY": 1,
        "COMPUTATION": 3,
        "OTHER": 0,
    }


def test_idle_launch_queue_memcpy() -> None:
    tr = _gpu_trace()
    it = idle_time_breakdown(tr)
    s7 = next(s for s in it.streams if s.stream == 7)
    # gaps on stream 7: 30->60 (memcpy launched at 12 < 30: other, 30 µs), 70->95 (launch 80 > 70: host_wait),
    # 100->101 (launch 86 < 100, 1 µs < 30: kernel_wait)
    assert (s7.other_us, s7.host_wait_us, s7.kernel_wait_us) == (30, 25, 1)
    ls = launch_stats(tr)
    assert ls.n_launches == 5 and ls.short_kernels.sum() == 1  # tiny_kernel: 1 µs on GPU, 10 µs launch
    assert ls.launch_delay.tolist() == [5.0, 9.0, 43.0, 10.0, 5.0]
    q = queue_length(tr)
    assert q.max_by_stream == {7: 2, 20: 1}  # launches at 80 and 86 both wait for the kernel at 95
    assert q.length[q.stream == 7].tolist() == [1, 0, 1, 0, 1, 2, 1, 0]
    mc = memory_copies(tr)
    assert mc.pageable_count == 1 and mc.kinds[0].direction == "HtoD"
    assert mc.kinds[0].bandwidth_gbps == pytest.approx(10_000 / 10 / 1e3)


def test_steps_profiler_and_optimizer() -> None:
    t = _T()
    for i, ts in enumerate((0, 100, 250)):
        t.x("user_annotation", f"ProfilerStep#{i + 7}", ts, 100 if i < 2 else 50)
    t.launch("k", 1, 2, 10, 40)
    tr = t.trace()
    st = step_timings(tr)
    assert st.source == "profiler_step" and [s.number for s in st.steps] == [7, 8, 9]
    assert st.steps[0].gpu_busy_us == 40 and st.steps[1].gpu_busy_us == 0 and st.max_us == 100
    t2 = _T()
    for ts in (0, 100, 300, 400):
        t2.x("user_annotation", "Optimizer.step#SGD.step", ts, 10)
    st2 = step_timings(t2.trace())
    assert st2.source == "optimizer" and st2.durations.tolist() == [100, 200, 100] and st2.median_us == 100
    assert step_timings(_gpu_trace()).source == "none"


def test_cpu_ops_self_and_total() -> None:
    t = _T()
    t.x("cpu_op", "aten::linear", 0, 100)
    t.x("cpu_op", "aten::matmul", 10, 60)
    t.x("cpu_op", "aten::mm", 20, 40)
    t.x("cpu_op", "aten::add", 80, 10)
    t.x("cpu_op", "aten::linear", 200, 50, tid=2)
    t.x("cpu_op", "aten::empty", 250, 0, tid=2)  # zero-length, touching its neighbour
    s = cpu_op_summary(t.trace())
    by = {o.name: o for o in s.by_total}
    assert by["aten::linear"].total_us == 150 and by["aten::linear"].self_us == 30 + 50
    assert by["aten::matmul"].self_us == 20 and by["aten::mm"].self_us == 40 and by["aten::empty"].self_us == 0
    assert s.by_self[0].name == "aten::linear" and s.wall_us == 150
    assert not temporal_breakdown(t.trace()).has_gpu  # CPU-only trace: no GPU figures, no errors


def test_rank_spread_flags_straggler() -> None:
    traces = {}
    for r in range(5):
        t = _T()
        step = 100 if r != 3 else 180
        for i in range(3):
            t.x("user_annotation", f"ProfilerStep#{i}", i * 200, step)
        t.launch("ncclKernel_AllReduce", 1, 1, 5, 50 if r != 3 else 5, stream=20)
        traces[r] = t.trace(rank=r)
    rs = rank_spread(MultiRankTrace(traces))
    assert rs.stragglers == (3,) and "step time" in rs.reasons[3] and rs.median_step_us == 100
    assert rs.step_spread == pytest.approx(0.8)

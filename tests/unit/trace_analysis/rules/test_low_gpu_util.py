"""low-gpu-util tells a GPU waiting for the host from one waiting with work queued (a compute stream that idles
with its next kernels already launched is not sent to look for data loading and Python overhead), judged on the
GPU's idle time."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze

pytestmark = pytest.mark.unit


def _trace(tmp_path: Path, queued: bool) -> Path:
    """Ten 10 µs kernels 1 ms apart: all launched up front (queued), or each launched after the previous ended."""
    b = TraceBuilder()
    for i in range(10):
        start = i * 1000.0
        call = i * 6.0 if queued else start - 20.0
        b.launch("compute_kernel", max(call, 0.0), start + 5.0, 10.0)
    return b.write(tmp_path / ("queued.json" if queued else "host.json"))


def _finding(path: Path):
    (f,) = analyze([path], rules=["low-gpu-util"]).findings_of("low-gpu-util")
    return f


def test_idle_with_work_queued_points_at_other_streams(tmp_path: Path) -> None:
    f = _finding(_trace(tmp_path, queued=True))
    assert "compute stream 7 has work queued during 100% of the idle time" in f.title
    assert f.fix.startswith("The GPU idles with work already queued")
    assert f.evidence.counts["compute_stream_host_wait_us"] == 0.0
    assert f.evidence.counts["compute_stream_queued_idle_us"] == pytest.approx(9 * 990.0)


def test_idle_waiting_for_launches_keeps_the_host_fix(tmp_path: Path) -> None:
    f = _finding(_trace(tmp_path, queued=False))
    assert "queued" not in f.title
    assert f.fix.startswith("Find what the host does while the GPU idles")
    assert f.evidence.counts["compute_stream_host_wait_us"] == pytest.approx(9 * 990.0)


# low-gpu-util's "idles with work queued" diagnosis is judged on the GPU's idle time (the finding's time lost), not on
# the compute stream's own idle time


NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


def test_queued_waits_under_communication_are_not_gpu_idle(tmp_path: Path) -> None:
    b = TraceBuilder()
    for i in range(5):  # per 2.2 ms: 100 µs of compute, 700 µs of NCCL, 1.4 ms of GPU idle
        t = i * 2_200.0
        b.launch("compute_kernel_a", t - 150.0, t, 50.0)  # launched after the previous row ended: host_wait
        b.launch(NCCL, t - 100.0, t + 50.0, 700.0, stream=20)
        # launched while compute_kernel_a runs, starts after the NCCL kernel and 400 µs more: queued ("other")
        b.launch("compute_kernel_b", t + 10.0, t + 1_150.0, 50.0)
    (f,) = analyze([b.write(tmp_path / "t.json")], rules=["low-gpu-util"]).findings_of("low-gpu-util")
    c = f.evidence.counts
    # the compute stream's own idle: mostly queued (1.1 ms a period, 0.7 of it under the NCCL kernel)
    assert c["compute_stream_queued_idle_us"] > c["compute_stream_host_wait_us"]
    # while the GPU idles: 400 µs queued, 1 ms waiting for a launch per period
    assert c["gpu_idle_queued_us"] == pytest.approx(5 * 400.0)
    assert c["gpu_idle_host_wait_us"] == pytest.approx(4 * 1_000.0)
    assert "queued" not in f.title
    assert f.fix.startswith("Find what the host does while the GPU idles")


def test_coverage_within_measures_each_interval() -> None:
    import numpy as np

    from dyno.trace_analysis.analyses.intervals import coverage_within

    busy_s, busy_e = np.array([0.0, 10.0, 30.0]), np.array([5.0, 20.0, 40.0])
    got = coverage_within(busy_s, busy_e, np.array([2.0, 5.0, 25.0, 50.0]), np.array([12.0, 10.0, 35.0, 60.0]))
    assert got.tolist() == [5.0, 0.0, 5.0, 0.0]

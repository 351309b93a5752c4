"""host-bound / launch-overhead judge the compute stream: the stream with the most *computation* kernel time, not
the stream with the most GPU time (in a DDP job the NCCL stream can hold more, and its gaps wait for gradients, not
for launches)."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze

from conftest import SHARED_TRACES

pytestmark = pytest.mark.unit

NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
SHARED = SHARED_TRACES


def _host_bound(tmp_path: Path, b: TraceBuilder) -> list:
    report = analyze([b.write(tmp_path / "t.json")], rules=["host-bound"])
    return list(report.findings_of("host-bound"))


def test_busy_compute_stream_beside_a_waiting_nccl_stream_is_not_host_bound(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.busy_gpu(0.0, 40, k_dur=100.0, stream=7)  # compute: 4.0 ms, launched well ahead (no host_wait)
    # NCCL: 4.5 ms in all (more than compute), each collective launched after the previous one ended
    b.launch(NCCL, -10.0, 0.0, 1500.0, stream=20)
    b.launch(NCCL, 2000.0, 3500.0, 1500.0, stream=20)
    b.launch(NCCL, 6000.0, 7000.0, 1500.0, stream=20)
    assert _host_bound(tmp_path, b) == []


def test_host_bound_compute_stream_beside_a_longer_nccl_stream_is_found(tmp_path: Path) -> None:
    b = TraceBuilder()
    for i in range(10):  # compute: 100 µs kernels, each launched 500 µs after the previous one ended
        b.launch("compute_kernel", i * 600.0 + 400.0, i * 600.0 + 500.0, 100.0, stream=7)
    for i in range(3):  # NCCL: 3 x 2 ms back to back (6 ms, more than compute's 1 ms), queued ahead
        b.launch(NCCL, i * 6.0, i * 2000.0, 2000.0, stream=20)
    (f,) = _host_bound(tmp_path, b)
    assert f.title.startswith("compute stream 7 ")
    assert f.evidence.time_lost_us == pytest.approx(9 * 500.0)
    assert {x.where for x in f.evidence.examples} == {"stream 7"}


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared GPU traces not available")
def test_trace_filter_judges_the_compute_stream_not_the_nccl_stream() -> None:
    report = analyze([SHARED / "trace_filter"], rules=["host-bound"])
    found = report.findings_of("host-bound")
    assert len(found) == 2
    for f in found:
        assert f.title.startswith("compute stream 7 "), f.title  # stream 84 carries the ncclKernel_SendRecv rows
        assert 0.30 < f.evidence.share < 0.34  # 32.3% / 32.9%, not 64.6% / 57.8%

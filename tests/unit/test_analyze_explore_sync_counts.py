"""sync-calls counts a blocking .cpu() copy once, by its launch call's time, as it does the call itself.

The copy (GPU row) was counted by its own start and its launch call by the call's start, and the number of
synchronize calls was the difference: a copy launched before the steady-state window but running inside it
gave "-1 CUDA synchronize calls"; one launched inside but running after the window end a phantom
"1 CUDA synchronize calls"."""

from __future__ import annotations

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze

pytestmark = pytest.mark.unit


def _trace(tmp_path, launch_ts, copy_ts, item=True):
    b = TraceBuilder()
    for i in range(3):
        b.step(i, i * 1000.0, 1000.0)
    b.busy_gpu(0.0, 25)
    b.memcpy("Memcpy DtoH (Device -> Pageable)", launch_ts, copy_ts, 5.0, nbytes=4, dur=20.0)
    if item:  # a device read: its cudaMemcpyAsync inside (an .item() calling no runtime reads a CPU tensor)
        b.cpu("aten::item", 2500.0, 20.0)
        b.runtime("cudaMemcpyAsync", 2502.0, 10.0)
    return analyze(b.write(tmp_path / "t.json"), rules=["sync-calls"])


def test_copy_launched_before_the_window(tmp_path):
    (f,) = _trace(tmp_path, 985.0, 1002.0).findings_of("sync-calls")  # launch in skipped step 0
    assert f.evidence.counts["sync_runtime_calls"] == 0 and f.evidence.counts["blocking_dtoh_copies"] == 0
    assert f.title == "1 .item() call in the steady-state steps: host blocked 20 µs, no GPU idle caused by them"


def test_copy_running_after_the_window(tmp_path):
    (f,) = _trace(tmp_path, 2985.0, 3002.0, item=False).findings_of("sync-calls")  # launch in the last step
    assert f.evidence.counts["sync_runtime_calls"] == 0 and f.evidence.counts["blocking_dtoh_copies"] == 1
    assert "CUDA synchronize" not in f.title and "1 blocking copy " in f.title


def test_gpu_idle_after_a_sync_stops_at_the_window_end(tmp_path):
    # a .item() in the last step, the GPU idle until a kernel long after the profiled steps: the idle time was
    # counted up to that kernel (997 ms, "33,235% of window", high) instead of up to the window end
    b = TraceBuilder()
    for i in range(3):
        b.step(i, i * 1000.0, 1000.0)
    t = 0.0
    while t < 2_850:
        b.launch("k", t, t + 6.0, 90.0)
        t += 100.0
    b.cpu("aten::item", 2_950.0, 20.0)
    b.runtime("cudaMemcpyAsync", 2_952.0, 10.0)
    b.launch("after", 1_000_000.0, 1_000_010.0, 50.0)
    (f,) = analyze(b.write(tmp_path / "t.json"), rules=["sync-calls"]).findings_of("sync-calls")
    assert f.evidence.counts["gpu_idle_after_sync_us"] == pytest.approx(3_000.0 - 2_970.0)
    # caused: from the .item()'s start (the GPU drained at 2896) to the window end, at most its 20 µs blocked
    assert f.evidence.time_lost_us == pytest.approx(20.0)
    assert f.evidence.share is not None and f.evidence.share <= 1.0

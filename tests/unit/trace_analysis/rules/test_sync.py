"""sync-calls: what counts as a device sync, and how each is counted.

PyTorch's Adam/AdamW (single-tensor, foreach and fused alike) keep each parameter's step counter on the CPU and
read it with .item() inside optimizer.step(): no device wait, so no sync-calls finding for .item() calls the user
never wrote. An .item() inside Optimizer.step that does call the CUDA runtime (a copy and a sync: a GPU tensor,
e.g. LBFGS's loss) still counts. More generally, on a GPU trace an .item() that calls no CUDA runtime function
reads a CPU tensor and is no device sync wherever it runs. A blocking .cpu() copy counts once."""

from __future__ import annotations

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze

pytestmark = pytest.mark.unit


def _item(b: TraceBuilder, ts: float, device: bool) -> None:
    b.cpu("aten::item", ts, 30.0)
    b.cpu("aten::_local_scalar_dense", ts + 1.0, 28.0)
    if device:  # what .item() on a CUDA tensor records inside _local_scalar_dense
        b.memcpy("Memcpy DtoH (Device -> Pinned)", ts + 2.0, ts + 10.0, 2.0, nbytes=4)
        b.runtime("cudaStreamSynchronize", ts + 8.0, 15.0)


def _gpu_trace(tmp_path, device_item_in_step: bool):
    b = TraceBuilder()
    for i in range(3):
        b.step(i, i * 1_000.0, 1_000.0)
        b.busy_gpu(i * 1_000.0, 2)
        b.cpu("Optimizer.step#Adam.step", i * 1_000.0 + 500.0, 200.0)
        for k in range(4):  # the step counters of 4 parameters
            _item(b, i * 1_000.0 + 510.0 + k * 40.0, device=device_item_in_step and k == 0)
    return b.write(tmp_path / "t.json")


def test_optimizer_step_counter_items_are_not_syncs(tmp_path):
    report = analyze(_gpu_trace(tmp_path, device_item_in_step=False), rules=["sync-calls"])
    assert report.findings_of("sync-calls") == []


def test_device_item_inside_optimizer_step_still_counts(tmp_path):
    report = analyze(_gpu_trace(tmp_path, device_item_in_step=True), rules=["sync-calls"])
    (f,) = report.findings_of("sync-calls")
    assert f.evidence.counts["item_calls"] == 2  # steps 1 and 2 (the first step is skipped), one each


def _side_thread_items(tmp_path, device: bool):
    """A GPU trace whose 20 .item() calls run on a side thread (a data-loading thread reading CPU int tensors, as
    negative_queue's 935 on one thread), with a device read among them when ``device``."""
    b = TraceBuilder()
    for i in range(3):
        b.step(i, i * 1_000.0, 1_000.0)
    b.busy_gpu(0.0, 25)
    for k in range(20):
        b.cpu("aten::item", 1_000.0 + k * 50.0, 2.0, tid=55)
        b.cpu("aten::_local_scalar_dense", 1_000.5 + k * 50.0, 1.0, tid=55)
    if device:
        _item(b, 2_500.0, device=True)
    return b.write(tmp_path / "t.json")


def test_items_that_call_no_cuda_runtime_are_not_device_syncs(tmp_path):
    # on a GPU trace an .item() that copies from the device records cudaMemcpyAsync (and a sync) inside it; one
    # that calls no runtime function reads a CPU tensor: no wait for the GPU, not a sync
    report = analyze(_side_thread_items(tmp_path, device=False), rules=["sync-calls"])
    assert report.findings_of("sync-calls") == []
    (f,) = analyze(_side_thread_items(tmp_path, device=True), rules=["sync-calls"]).findings_of("sync-calls")
    assert f.evidence.counts["item_calls"] == 1 and f.evidence.counts["cpu_item_calls"] == 20
    assert f.evidence.counts["host_blocked_us"] == pytest.approx(30.0)  # the device read only


def test_real_adam_cpu_trace_has_no_item_finding(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.Adam(model.parameters(), foreach=True)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=3, repeat=1)) as prof:
        for _ in range(4):
            loss = model(torch.randn(4, 8)).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()  # reads each parameter's step counter with .item()
            prof.step()
    path = tmp_path / "adam.json"
    prof.export_chrome_trace(str(path))
    report = analyze(path, rules=["sync-calls"])
    assert report.findings_of("sync-calls") == []
    assert [o.status for o in report.rules] == ["clean"]


# sync-calls counts a blocking .cpu() copy once, by its launch call's time, as it does the call itself


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
    # a .item() in the last step, the GPU idle until a kernel long after the profiled steps: the idle time counts
    # up to the window end, not up to that kernel
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

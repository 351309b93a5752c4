"""The rules on a trace of one process driving two GPUs: GPU idle and busy judged per device, streams per device.

Each fix has a positive test (two devices) and a negative one (one device, or two devices that do not show the
pattern), so that one-GPU traces keep their findings.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from multigpu_trace_builder import MultiGpuTraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.loader import load_trace
from dyno.trace_analysis.rules._common import compute_streams, gpu_utilization
from dyno.trace_analysis.rules.context import RuleContext
from dyno.trace_analysis.rules.startup import startup_calls

pytestmark = pytest.mark.unit


def _ctx(tmp_path: Path, b: MultiGpuTraceBuilder) -> RuleContext:
    return RuleContext(load_trace(b.write(tmp_path / "t.json")))


def _findings(tmp_path: Path, b: MultiGpuTraceBuilder, rules: list[str]) -> list:
    return list(analyze(b.write(tmp_path / "t.json"), rules=rules).findings)


# ---- GPU utilization (GpuBound: short-kernels, slow-runtime-calls, launch-queue) --------------------------------
def test_gpu_utilization_one_busy_gpu_of_two_is_half(tmp_path):
    b = MultiGpuTraceBuilder()
    b.busy_on(0, 1000.0, 10)
    b.busy_on(1, 2000.0, 10)
    assert gpu_utilization(_ctx(tmp_path, b)) == pytest.approx(0.5)


def test_gpu_utilization_two_saturated_gpus(tmp_path):
    b = MultiGpuTraceBuilder()
    b.busy_on(0, 1000.0, 10)
    b.busy_on(1, 1000.0, 10)
    assert gpu_utilization(_ctx(tmp_path, b)) == pytest.approx(1.0)


# ---- compute stream and host-bound per device -----------------------------------------------------------------
def _two_gpus(kernels: int, starved: tuple[float, int] | None) -> MultiGpuTraceBuilder:
    """GPU 0 busy from 1000 µs (`kernels` back-to-back kernels); GPU 1 host-bound from `starved` = (start µs,
    kernels: 20 µs kernels 200 µs apart, each launched as the previous one ends), or, None, busy as GPU 0."""
    b = MultiGpuTraceBuilder()
    b.busy_on(0, 1000.0, kernels)
    if starved is not None:
        b.host_bound_on(1, *starved)
    else:
        b.busy_on(1, 1000.0, kernels)
    return b


def _fed_and_starved(starved: bool) -> MultiGpuTraceBuilder:
    """GPU 0 saturated (40 kernels over [1000, 5000]); GPU 1 over the same span either waits for each launch
    (``starved``) or is saturated too."""
    return _two_gpus(40, (1000.0, 19) if starved else None)


def test_compute_stream_per_device(tmp_path):
    b = _fed_and_starved(True)
    b.busy_on(1, 6000.0, 5, stream=20, name="side_kernel", k_dur=10.0)  # less compute: not GPU 1's compute stream
    assert compute_streams(_ctx(tmp_path, b)) == {0: 7, 1: 7}


def test_host_bound_names_the_starved_device(tmp_path):
    found = _findings(tmp_path, _fed_and_starved(True), ["host-bound"])
    assert len(found) == 1
    f = found[0]
    # stream 7 of GPU 1 waits ~200 of every 220 µs; merged with GPU 0's stream 7 its gaps would be hidden
    assert f.title.startswith("GPU 1 compute stream 7 waits for kernel launches")
    assert f.evidence.share > 0.8
    assert "host_wait_share_stream_gpu1_7" in f.evidence.counts
    assert all(ex.where == "GPU 1 stream 7" for ex in f.evidence.examples)


def test_host_bound_two_fed_devices_no_finding(tmp_path):
    assert _findings(tmp_path, _fed_and_starved(False), ["host-bound", "launch-overhead"]) == []


def test_host_bound_one_device_title_unchanged(tmp_path):
    b = MultiGpuTraceBuilder(devices=(0,))
    b.host_bound_on(0, 1000.0, 19)
    (f,) = _findings(tmp_path, b, ["host-bound"])
    assert f.title.startswith("compute stream 7 waits for kernel launches")
    assert "host_wait_share_stream_7" in f.evidence.counts


# ---- low-gpu-util: every device over the rank's GPU span -------------------------------------------------------
def _late_second(late: bool) -> MultiGpuTraceBuilder:
    """GPU 0 busy over [1000, 11000]; GPU 1 only at the end, five 20 µs kernels each launched after the previous
    one ended (``late``), or busy over all of it."""
    return _two_gpus(100, (10000.0, 5) if late else None)


def test_low_gpu_util_idle_gpu_before_its_first_kernel(tmp_path):
    found = _findings(tmp_path, _late_second(True), ["low-gpu-util"])
    assert [f.title.split(" busy")[0] for f in found] == ["GPU 1"]
    # over the rank's GPU span it is busy 1% (over its own first-to-last activity 11%): the GPU idled for 9 ms
    counts = found[0].evidence.counts
    assert counts["utilization"] == pytest.approx(0.01)
    assert counts["idle_us"] == pytest.approx(9900.0)
    assert "of the GPU span" in found[0].title
    # the device's own compute stream's idle split (stream 7 of GPU 1, not GPU 0's stream 7)
    assert counts["compute_stream_host_wait_us"] == pytest.approx(800.0)


def test_low_gpu_util_two_busy_devices_no_finding(tmp_path):
    assert _findings(tmp_path, _late_second(False), ["low-gpu-util"]) == []


# ---- CUDA start-up: each device loads its own modules ----------------------------------------------------------
def _first_launches(second_device: int) -> MultiGpuTraceBuilder:
    """A 3 ms first launch of conv_kernel on GPU 0, then a 3 ms launch of it on GPU ``second_device``."""
    b = MultiGpuTraceBuilder()
    b.launch("conv_kernel", 1000.0, 4100.0, 100.0, dur=3000.0, device=0)
    b.launch("conv_kernel", 5000.0, 8100.0, 100.0, dur=3000.0, device=second_device)
    return b


def test_startup_first_launch_on_each_device(tmp_path):
    ctx = _ctx(tmp_path, _first_launches(1))
    # GPU 1's first launch of the kernel loads its module into GPU 1's context: start-up too
    assert startup_calls(ctx).rows.shape[0] == 2
    assert startup_calls(ctx).host_us == pytest.approx(6000.0)


def test_startup_second_launch_on_the_same_device_is_not(tmp_path):
    ctx = _ctx(tmp_path, _first_launches(0))
    assert startup_calls(ctx).rows.shape[0] == 1


def _init_calls(devices: tuple[int, ...]) -> MultiGpuTraceBuilder:
    b = MultiGpuTraceBuilder(devices=devices)
    b.runtime("cudaStreamCreateWithFlags", 100.0, 2000.0)  # context of the first device
    b.runtime("cudaStreamCreateWithFlags", 3000.0, 2000.0)  # of the second, when there is one
    for d in devices:
        b.busy_on(d, 6000.0, 5)
    return b


def test_startup_init_call_per_device(tmp_path):
    assert startup_calls(_ctx(tmp_path, _init_calls((0, 1)))).rows.shape[0] == 2


def test_startup_init_call_one_device_only_first(tmp_path):
    assert startup_calls(_ctx(tmp_path, _init_calls((0,)))).rows.shape[0] == 1


# ---- sync-calls: GPU idle the syncs cause, per device ----------------------------------------------------------
def _sync_drains_gpu0(with_gpu1: bool) -> MultiGpuTraceBuilder:
    """GPU 0 runs a kernel over [1000, 1100]; the host waits for it in cudaStreamSynchronize [1010, 1100], then
    does 500 µs of Python before launching GPU 0's next kernel at 1610. GPU 1 (``with_gpu1``) stays busy."""
    b = MultiGpuTraceBuilder(devices=(0, 1) if with_gpu1 else (0,))
    b.launch("k", 900.0, 1000.0, 100.0, device=0)
    b.runtime("cudaStreamSynchronize", 1010.0, 90.0)
    b.cpu("python_work", 1100.0, 500.0)
    b.launch("k", 1600.0, 1610.0, 100.0, device=0)
    if with_gpu1:
        b.busy_on(1, 500.0, 20)
    return b


def test_sync_calls_idle_of_the_drained_device(tmp_path):
    (f,) = _findings(tmp_path, _sync_drains_gpu0(True), ["sync-calls"])
    # GPU 0 idles 90 µs because of the sync (the blocked host time), GPU 1 not at all: 45 µs on average; pooled,
    # GPU 1's kernels hid GPU 0's idle (0 µs)
    assert f.evidence.counts["gpu_idle_caused_us"] == pytest.approx(45.0)
    assert f.evidence.time_lost_us == pytest.approx(45.0)


def test_sync_calls_one_device(tmp_path):
    (f,) = _findings(tmp_path, _sync_drains_gpu0(False), ["sync-calls"])
    assert f.evidence.counts["gpu_idle_caused_us"] == pytest.approx(90.0)


# ---- exposed-comm: only the same device's compute hides communication ------------------------------------------
def _comm_beside(comm_device: int) -> MultiGpuTraceBuilder:
    b = MultiGpuTraceBuilder()
    b.busy_on(0, 1000.0, 10)
    b.busy_on(1, 1000.0, 10, stream=20) if comm_device == 0 else None  # GPU 1 works too when the comm is on 0
    b.nccl_on(comm_device, 1000.0, 1000.0)
    return b


def test_exposed_comm_beside_another_devices_compute(tmp_path):
    (f,) = _findings(tmp_path, _comm_beside(1), ["exposed-comm"])
    assert f.evidence.counts["exposed_us_gpu1"] == pytest.approx(1000.0)
    assert f.evidence.counts["exposed_us_gpu0"] == pytest.approx(0.0)
    assert f.evidence.time_lost_us == pytest.approx(500.0)  # the mean of the two GPUs
    assert "mean of 2 GPUs" in f.title


def test_exposed_comm_hidden_on_its_device(tmp_path):
    assert _findings(tmp_path, _comm_beside(0), ["exposed-comm"]) == []


# ---- gpu-starvation: a GPU idle before its first (after its last) work while another GPU works -----------------
def _late_start(start_us: float) -> MultiGpuTraceBuilder:
    """GPU 0 busy over [1000, 801000]; GPU 1 busy over [start_us, 801000] (a pipeline stage waiting to start)."""
    b = MultiGpuTraceBuilder()
    b.busy_on(0, 1000.0, 800, k_dur=1000.0)
    b.busy_on(1, start_us, int((801000.0 - start_us) // 1000), k_dur=1000.0)
    return b


def test_gpu_starvation_leading_idle_of_a_late_gpu(tmp_path):
    (f,) = _findings(tmp_path, _late_start(601000.0), ["gpu-starvation"])
    assert f.title.startswith("GPU 1 idle 1 time for more than 500.0 ms")
    assert f.evidence.counts["longest_gap_us"] == pytest.approx(600000.0)
    assert f.evidence.examples[0].ts_us == pytest.approx(1000.0)


def test_gpu_starvation_short_leading_idle_no_finding(tmp_path):
    assert _findings(tmp_path, _late_start(101000.0), ["gpu-starvation"]) == []


# ---- no-tensor-cores: each GEMM judged on its own GPU's compute capability -------------------------------------
def _fp32_gemms(caps: dict[int, tuple[int, int]]) -> MultiGpuTraceBuilder:
    """fp32 SGEMMs (no tensor cores) on GPU 0 and GPU 1 with the given compute capabilities."""
    b = MultiGpuTraceBuilder(capabilities=caps)
    b.busy_on(0, 1000.0, 4, name="volta_sgemm_128x64_nn")
    b.busy_on(1, 1000.0, 6, name="volta_sgemm_128x64_nn")
    return b


def test_no_tensor_cores_only_on_the_gpu_that_has_them(tmp_path):
    (f,) = _findings(tmp_path, _fp32_gemms({0: (6, 0), 1: (8, 0)}), ["no-tensor-cores"])
    # GPU 0 (a P100) has no tensor cores: only GPU 1's six GEMMs could have used them
    assert f.evidence.counts["gemm_kernels"] == 6
    assert "on GPU 1 (compute capability 8.0)" in f.title


def test_no_tensor_cores_none_on_pre_volta_gpus(tmp_path):
    assert _findings(tmp_path, _fp32_gemms({0: (6, 0), 1: (6, 1)}), ["no-tensor-cores"]) == []

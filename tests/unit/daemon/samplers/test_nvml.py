"""The NVML wrapper and GpuSampler against a fake pynvml that has the real API names, constants, ctypes
structures and error classes (taken from the installed nvidia-ml-py), so only the C library is faked."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from dyno.daemon.samplers import gpu_metrics as gm
from dyno.daemon.samplers.base import GpuProcess, Sampler
from dyno.daemon.samplers.gpu import GpuSampler, NullGpuSampler, make_gpu_sampler
from dyno.daemon.samplers.nvml import Nvml, NvmlUnavailable

pynvml = pytest.importorskip("pynvml")

from fake_pynvml import GIB, FakeDevice, FakePynvml, by_key, lab, two_gpus  # noqa: E402 - after the importorskip

pytestmark = pytest.mark.unit


def test_reads_every_counter_and_one_not_supported_counter_is_just_absent() -> None:
    fake = FakePynvml(two_gpus(fail={"nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_NOT_SUPPORTED}))
    sampler = make_gpu_sampler("auto", pynvml_module=fake)
    assert isinstance(sampler, GpuSampler) and isinstance(sampler, Sampler)
    state = sampler.state()
    assert state.ok and state.backend == "auto" and not state.simulated

    inv = sampler.inventory()
    assert [(d.index, d.uuid, d.pci_bus_id, d.memory_total_bytes) for d in inv] == [
        (0, "GPU-00000000-0000-0000-0000-000000000000", "00000000:18:00.0", 80 * GIB),
        (1, "GPU-11111111-1111-1111-1111-111111111111", "00000000:2A:00.0", 80 * GIB),
    ]
    assert inv[0].name == "NVIDIA H100 80GB HBM3" and not inv[0].simulated

    got = by_key(sampler.sample())
    g0, g1 = lab(0, inv[0].uuid), lab(1, inv[1].uuid)
    assert got[(gm.POWER, g0)] == 350.0
    assert (gm.POWER, g1) not in got  # the failing counter is absent ...
    for name, value in (  # ... and everything else of that GPU is there
        (gm.UTILIZATION, 75.0),
        (gm.MEMORY_UTILIZATION, 40.0),
        (gm.MEMORY_USED, 10.0 * GIB),
        (gm.MEMORY_TOTAL, 80.0 * GIB),
        (gm.POWER_LIMIT, 700.0),
        (gm.ENERGY, 123456.0),
        (gm.TEMPERATURE, 61.0),
        (gm.SM_CLOCK, 1980.0),
        (gm.MEMORY_CLOCK, 2619.0),
        (gm.PCIE_TX, 1000.0 * 1024),
        (gm.PCIE_RX, 2000.0 * 1024),
        (gm.ECC_CORRECTED, 3.0),
        (gm.ECC_UNCORRECTED, 0.0),
        (gm.XID_ERRORS, 0.0),
        (gm.PROCESS_COUNT, 2.0),
        (gm.THROTTLE_REASONS, float(0x4 | 0x8)),
    ):
        assert got[(name, g1)] == value, name
    reason = dict(g1)

    def active(r: str) -> float:
        return got[(gm.THROTTLE_REASON_ACTIVE, tuple(sorted({**reason, "reason": r}.items())))]

    assert active("sw_power_cap") == 1.0 and active("hw_slowdown") == 1.0 and active("gpu_idle") == 0.0

    missing = sampler.last_device_samples()[1].unavailable
    assert "NotSupported" in missing["power"]
    assert "GPM not supported" in missing["gpm"]

    # not asked again: NotSupported is permanent for that device
    sampler.sample()
    assert fake.calls[(1, "nvmlDeviceGetPowerUsage")] == 1
    assert fake.calls[(0, "nvmlDeviceGetPowerUsage")] == 2

    # per-process memory: pid 101 is in both lists (max wins), pid 102's memory is unknown (0)
    assert sorted(sampler.processes(), key=lambda p: (p.gpu_index, p.pid)) == [
        GpuProcess(pid=101, gpu_index=0, used_memory_bytes=5 * GIB),
        GpuProcess(pid=102, gpu_index=0, used_memory_bytes=0),
        GpuProcess(pid=101, gpu_index=1, used_memory_bytes=5 * GIB),
        GpuProcess(pid=102, gpu_index=1, used_memory_bytes=0),
    ]

    sampler.close()
    assert not fake.initialised and fake.event_set_freed
    assert sampler.sample() == [] and not sampler.state().ok


def test_transient_error_is_retried_next_tick() -> None:
    fake = FakePynvml([FakeDevice(fail_once={"nvmlDeviceGetTemperature": pynvml.NVML_ERROR_GPU_IS_LOST})])
    sampler = make_gpu_sampler("nvml", pynvml_module=fake)
    g0 = lab(0, FakeDevice().uuid)
    assert sampler.processes() == []  # nothing before the first sample (and no NVML call off the sampling thread)
    first = by_key(sampler.sample())
    assert (gm.TEMPERATURE, g0) not in first and (gm.UTILIZATION, g0) in first
    assert "GpuIsLost" in sampler.last_device_samples()[0].unavailable["temperature"]
    assert by_key(sampler.sample())[(gm.TEMPERATURE, g0)] == 61.0


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "libnvidia-ml.so.1 not found"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver not loaded"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "no permission"),
        (pynvml.NVML_ERROR_UNKNOWN, "nvmlInit failed"),
    ],
)
def test_init_failure_makes_auto_and_nvml_unavailable_with_reason(code: int, words: str) -> None:
    for backend in ("auto", "nvml"):
        sampler = make_gpu_sampler(backend, sim_gpus=4, pynvml_module=FakePynvml([FakeDevice()], init_error=code))
        assert isinstance(sampler, NullGpuSampler)  # auto never silently falls back to the simulator
        state = sampler.state()
        assert not state.ok and not state.simulated and state.backend == backend
        assert words in state.reason
        assert sampler.sample() == [] and sampler.inventory() == [] and sampler.processes() == []


def test_no_gpus_is_unavailable() -> None:
    with pytest.raises(NvmlUnavailable, match="no GPUs"):
        Nvml(FakePynvml([])).start()


def test_gpm_metrics_on_supported_device_from_the_second_sample() -> None:
    gpm = {
        pynvml.NVML_GPM_METRIC_SM_UTIL: 81.5,
        pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: 40.25,
        pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 55.0,
        pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: 33.0,
        pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC: 10.0,  # MiB/s
        pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC: 20.0,
    }
    fake = FakePynvml([FakeDevice(gpm=gpm), FakeDevice(uuid="GPU-1")])
    sampler = make_gpu_sampler("auto", pynvml_module=fake)
    g0, g1 = lab(0, FakeDevice().uuid), lab(1, "GPU-1")

    first = by_key(sampler.sample())
    assert (gm.SM_ACTIVE, g0) not in first  # the first GPM sample only primes
    assert sampler.last_device_samples()[0].unavailable["gpm"].startswith("priming")

    for _ in range(2):  # twice, so the swapped sample pair is exercised too
        got = by_key(sampler.sample())
        assert got[(gm.SM_ACTIVE, g0)] == 81.5
        assert got[(gm.SM_OCCUPANCY, g0)] == 40.25
        assert got[(gm.TENSOR_ACTIVE, g0)] == 55.0
        assert got[(gm.DRAM_ACTIVE, g0)] == 33.0
        assert got[(gm.PCIE_TX, g0)] == 10.0 * 1024 * 1024
        assert got[(gm.PCIE_RX, g0)] == 20.0 * 1024 * 1024
        # unsupported device: no GPM series, PCIe from nvmlDeviceGetPcieThroughput instead
        assert not any(name == gm.SM_ACTIVE and labels == g1 for name, labels in got)
        assert got[(gm.PCIE_TX, g1)] == 1000.0 * 1024
    # only the priming tick needed the (20 ms per direction) PCIe call; afterwards GPM gives PCIe
    assert fake.calls[(0, "nvmlDeviceGetPcieThroughput")] == 2  # tx and rx, once
    assert fake.calls[(1, "nvmlDeviceGetPcieThroughput")] == 6

    sampler.close()
    assert fake.freed_samples == 2


def test_gpm_partial_metrics_and_pcie_fallback() -> None:
    fake = FakePynvml([FakeDevice(gpm={pynvml.NVML_GPM_METRIC_SM_UTIL: 12.0})])
    sampler = make_gpu_sampler("auto", pynvml_module=fake)
    g0 = lab(0, FakeDevice().uuid)
    sampler.sample()
    got = by_key(sampler.sample())
    assert got[(gm.SM_ACTIVE, g0)] == 12.0
    assert (gm.TENSOR_ACTIVE, g0) not in got
    assert "NotSupported" in sampler.last_device_samples()[0].unavailable[f"gpm:{gm.TENSOR_ACTIVE}"]
    assert got[(gm.PCIE_RX, g0)] == 2000.0 * 1024  # GPM lacked PCIe on this device


def test_xid_events_are_counted_per_device() -> None:
    fake = FakePynvml(two_gpus())
    sampler = make_gpu_sampler("auto", pynvml_module=fake)
    handle1 = fake.nvmlDeviceGetHandleByIndex(1)
    sampler.sample()
    # event data carries the device handle NVML was given (the same object in this fake)
    nvml_handle1 = sampler._nvml._devices[1].handle  # noqa: SLF001 - the registered handle, as NVML returns it
    assert handle1.index == nvml_handle1.index
    xid = pynvml.nvmlEventTypeXidCriticalError
    fake.events += [
        SimpleNamespace(device=nvml_handle1, eventType=xid, eventData=79),
        SimpleNamespace(device=nvml_handle1, eventType=xid, eventData=48),
    ]
    got = by_key(sampler.sample())
    g0, g1 = lab(0, FakeDevice().uuid), lab(1, "GPU-11111111-1111-1111-1111-111111111111")
    assert got[(gm.XID_ERRORS, g1)] == 2.0 and got[(gm.LAST_XID, g1)] == 48.0
    assert got[(gm.XID_ERRORS, g0)] == 0.0 and (gm.LAST_XID, g0) not in got


def test_xid_unsupported_device_reports_why() -> None:
    fake = FakePynvml([FakeDevice(events=0)])
    sampler = make_gpu_sampler("auto", pynvml_module=fake)
    got = by_key(sampler.sample())
    assert (gm.XID_ERRORS, lab(0, FakeDevice().uuid)) not in got
    assert "not supported" in sampler.last_device_samples()[0].unavailable["xid"]
    assert fake.event_set_freed  # no device registered: the event set is not kept


def test_backend_none_and_bad_backend() -> None:
    sampler = make_gpu_sampler("none")
    assert sampler.state().reason == "disabled by --gpu-backend none" and not sampler.state().ok
    with pytest.raises(ValueError, match="auto, nvml, sim, none"):
        make_gpu_sampler("cuda")


def test_real_pynvml_on_this_host() -> None:
    """Without a driver the real module must give a clear reason; with one, an inventory."""
    sampler = make_gpu_sampler("auto")
    try:
        state = sampler.state()
        if state.ok:
            assert sampler.inventory()
        else:
            assert state.reason and not state.simulated
    finally:
        sampler.close()


def test_unexpected_sampling_error_reaches_the_loop_once_and_marks_the_gpu_sampler_down(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An NVML failure outside the per-counter handling (a bug, a vanished device list) reaches the sampling
    loop once and marks the GPU sampler down."""
    import logging

    from dyno.daemon.history import History
    from dyno.daemon.loop import SamplingLoop

    sampler = make_gpu_sampler("nvml", pynvml_module=FakePynvml([FakeDevice()]))
    loop = SamplingLoop([sampler], History(4), 1.0)

    def broken() -> list[Any]:
        raise IndexError("device list changed")

    monkeypatch.setattr(sampler._nvml, "sample_all", broken)  # type: ignore[attr-defined]
    with caplog.at_level(logging.DEBUG):
        for _ in range(20):
            loop.tick()
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
    (state,) = loop.sampler_states()
    assert not state.ok and "IndexError: device list changed" in state.reason

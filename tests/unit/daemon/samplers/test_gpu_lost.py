"""A GPU that falls off the bus (Xid 79): NVML answers every call on it with NVMLError_GpuIsLost. dynod logs one
ERROR naming the GPU, exports gpu_lost{gpu,uuid} = 1 (0 for healthy GPUs) and makes two driver calls a tick for it."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import pytest

from dyno.daemon.samplers import gpu as gpu_module
from dyno.daemon.samplers import gpu_metrics as gm
from dyno.daemon.samplers.gpu import GpuSampler, make_gpu_sampler
from dyno.daemon.samplers.gpu_sim import SimGpuSampler

pynvml = pytest.importorskip("pynvml")

from fake_pynvml import FakePynvml, by_key, lab, two_gpus  # noqa: E402 - after the importorskip

pytestmark = pytest.mark.unit

LOST = pynvml.NVML_ERROR_GPU_IS_LOST
_EVERY_COUNTER = (
    "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetTemperature",
    "nvmlDeviceGetClockInfo", "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetPcieThroughput", "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses",
)  # fmt: skip


def test_a_lost_gpu_is_one_error_line_and_gpu_lost_1_and_the_others_are_sampled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakePynvml(two_gpus())
    sampler = make_gpu_sampler("nvml", pynvml_module=fake)
    assert isinstance(sampler, GpuSampler)
    g0, g1 = (lab(d.index, d.uuid) for d in sampler.inventory())
    got = by_key(sampler.sample())
    assert got[(gm.LOST, g0)] == 0.0 and got[(gm.LOST, g1)] == 0.0

    fake.devices[1].fail = dict.fromkeys(_EVERY_COUNTER, LOST)  # the second GPU falls off the bus
    handle1 = sampler._nvml._devices[1].handle  # noqa: SLF001 - the registered handle, as NVML's event data has it
    xid = SimpleNamespace(device=handle1, eventType=pynvml.nvmlEventTypeXidCriticalError, eventData=79)
    fake.events.append(xid)
    with caplog.at_level(logging.INFO, logger="dyno.daemon.samplers.nvml"):
        for _ in range(3):
            got = by_key(sampler.sample())
    assert got[(gm.LOST, g1)] == 1.0 and got[(gm.LOST, g0)] == 0.0
    assert got[(gm.UTILIZATION, g0)] == 75.0  # the healthy GPU is untouched
    assert (gm.UTILIZATION, g1) not in got and (gm.TEMPERATURE, g1) not in got
    assert got[(gm.XID_ERRORS, g1)] == 1.0 and got[(gm.LAST_XID, g1)] == 79.0  # how the driver reports the loss
    lines = [r for r in caplog.records if "gpu 1" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.ERROR, [r.getMessage() for r in lines]
    assert "GPU-11111111-1111-1111-1111-111111111111" in lines[0].getMessage() and "lost" in lines[0].getMessage()
    # not every counter again each tick: after the first two calls fail, the rest are not asked
    assert fake.calls[(1, "nvmlDeviceGetTemperature")] == 1  # only the healthy first tick

    caplog.clear()
    fake.devices[1].fail = {}  # the driver was reset
    with caplog.at_level(logging.INFO, logger="dyno.daemon.samplers.nvml"):
        got = by_key(sampler.sample())
    assert got[(gm.LOST, g1)] == 0.0 and got[(gm.UTILIZATION, g1)] == 75.0
    assert any("answers again" in r.getMessage() for r in caplog.records)


def test_the_simulator_emits_gpu_lost_0_like_every_other_gpu_series() -> None:
    sim = SimGpuSampler(2)
    lost = [r for r in sim.sample() if r.name == gm.LOST]
    assert [r.value for r in lost] == [0.0, 0.0] and all(("simulated", "true") in r.labels for r in lost)
    assert gm.LOST in gm.GAUGE_METRICS


class _SlowInit(FakePynvml):
    def nvmlInit(self) -> None:
        time.sleep(0.5)
        super().nvmlInit()


def test_an_nvml_start_that_hangs_is_named_in_the_log(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """nvmlInit on a wedged driver can block for minutes before dynod is ready; systemd then timed the start out
    with no line from dynod saying where it stood."""
    monkeypatch.setattr(gpu_module, "NVML_SLOW_START_S", 0.1)
    with caplog.at_level(logging.WARNING, logger="dyno.daemon.samplers.gpu"):
        sampler = make_gpu_sampler("nvml", pynvml_module=_SlowInit(two_gpus()))
    assert isinstance(sampler, GpuSampler)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("NVML initialisation has not returned after 0 s") and "not ready" in line


def test_a_quick_nvml_start_logs_nothing(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(gpu_module, "NVML_SLOW_START_S", 5.0)
    with caplog.at_level(logging.WARNING, logger="dyno.daemon.samplers.gpu"):
        make_gpu_sampler("nvml", pynvml_module=FakePynvml(two_gpus()))
    time.sleep(0.1)
    assert caplog.records == []

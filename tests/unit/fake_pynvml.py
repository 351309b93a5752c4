"""A fake pynvml with the real API's names, constants and ctypes, for the NVML sampler tests: devices as data,
errors raised as NVML raises them."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from dyno.daemon.samplers import gpu_metrics as gm
from dyno.daemon.samplers.base import Reading

pynvml = pytest.importorskip("pynvml")

GIB = 1024**3


@dataclass
class FakeDevice:
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    bus_id: bytes = b"00000000:18:00.0"
    total: int = 80 * GIB
    used: int = 10 * GIB
    util: tuple[int, int] = (75, 40)
    power_mw: int = 350_000
    limit_mw: int = 700_000
    energy_mj: int = 123_456_000
    temp_c: int = 61
    clocks: dict[int, int] = field(default_factory=lambda: {pynvml.NVML_CLOCK_SM: 1980, pynvml.NVML_CLOCK_MEM: 2619})
    reasons: int = pynvml.nvmlClocksEventReasonSwPowerCap | pynvml.nvmlClocksEventReasonHwSlowdown
    ecc: tuple[int, int] = (3, 0)
    pcie_kbps: tuple[int, int] = (1000, 2000)  # tx, rx in KB/s
    compute: list[tuple[int, int | None]] = field(default_factory=lambda: [(101, 4 * GIB), (102, None)])
    graphics: list[tuple[int, int | None]] = field(default_factory=lambda: [(101, 5 * GIB)])
    gpm: dict[int, float] | None = None  # metric id -> value; None: GPM unsupported
    events: int = pynvml.nvmlEventTypeXidCriticalError | pynvml.nvmlEventTypeSingleBitEccError
    fail: dict[str, int] = field(default_factory=dict)  # function name -> NVML error code it raises
    fail_once: dict[str, int] = field(default_factory=dict)


class FakePynvml:
    """Module-like object: the real pynvml's constants, structs and NVMLError hierarchy, fake functions."""

    def __init__(self, devices: list[FakeDevice], init_error: int | None = None) -> None:
        for name in dir(pynvml):
            if name.startswith(("NVML_", "NVMLError", "nvmlClocksEventReason", "nvmlEventType", "c_nvml")):
                setattr(self, name, getattr(pynvml, name))
        self.devices = devices
        self.init_error = init_error
        self.calls: dict[tuple[int, str], int] = {}
        self.initialised = False
        self.events: list[SimpleNamespace] = []
        self._buffers: list[Any] = []
        self._sample_owner: dict[int, tuple[int, int]] = {}  # sample address -> (device index, sequence)
        self._seq = 0
        self.freed_samples = 0
        self.event_set_freed = False

    # helpers
    def _dev(self, handle: SimpleNamespace, fn: str) -> FakeDevice:
        assert self.initialised, f"{fn} called before nvmlInit"
        self.calls[(handle.index, fn)] = self.calls.get((handle.index, fn), 0) + 1
        dev = self.devices[handle.index]
        if fn in dev.fail:
            raise pynvml.NVMLError(dev.fail[fn])
        if fn in dev.fail_once:
            raise pynvml.NVMLError(dev.fail_once.pop(fn))
        return dev

    @staticmethod
    def _addr(sample: Any) -> int:
        return int(ctypes.cast(sample, ctypes.c_void_p).value or 0)

    # lifecycle
    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.initialised = False

    def nvmlSystemGetDriverVersion(self) -> str:
        return "570.00"

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimpleNamespace:
        return SimpleNamespace(index=index)

    # static info
    def nvmlDeviceGetName(self, h: SimpleNamespace) -> str:
        return self._dev(h, "nvmlDeviceGetName").name

    def nvmlDeviceGetUUID(self, h: SimpleNamespace) -> str:
        return self._dev(h, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetPciInfo(self, h: SimpleNamespace) -> SimpleNamespace:
        return SimpleNamespace(busId=self._dev(h, "nvmlDeviceGetPciInfo").bus_id)

    # counters
    def nvmlDeviceGetMemoryInfo(self, h: SimpleNamespace) -> SimpleNamespace:
        d = self._dev(h, "nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(total=d.total, used=d.used, free=d.total - d.used)

    def nvmlDeviceGetUtilizationRates(self, h: SimpleNamespace) -> SimpleNamespace:
        d = self._dev(h, "nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=d.util[0], memory=d.util[1])

    def nvmlDeviceGetPowerUsage(self, h: SimpleNamespace) -> int:
        return self._dev(h, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: SimpleNamespace) -> int:
        return self._dev(h, "nvmlDeviceGetEnforcedPowerLimit").limit_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, h: SimpleNamespace) -> int:
        return self._dev(h, "nvmlDeviceGetTotalEnergyConsumption").energy_mj

    def nvmlDeviceGetTemperature(self, h: SimpleNamespace, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._dev(h, "nvmlDeviceGetTemperature").temp_c

    def nvmlDeviceGetClockInfo(self, h: SimpleNamespace, clock_type: int) -> int:
        return self._dev(h, "nvmlDeviceGetClockInfo").clocks[clock_type]

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: SimpleNamespace) -> int:
        return self._dev(h, "nvmlDeviceGetCurrentClocksEventReasons").reasons

    def nvmlDeviceGetTotalEccErrors(self, h: SimpleNamespace, error_type: int, counter_type: int) -> int:
        assert counter_type == pynvml.NVML_VOLATILE_ECC
        d = self._dev(h, "nvmlDeviceGetTotalEccErrors")
        return d.ecc[0] if error_type == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED else d.ecc[1]

    def nvmlDeviceGetPcieThroughput(self, h: SimpleNamespace, counter: int) -> int:
        d = self._dev(h, "nvmlDeviceGetPcieThroughput")
        return d.pcie_kbps[0] if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES else d.pcie_kbps[1]

    def _procs(self, entries: list[tuple[int, int | None]]) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in entries]

    def nvmlDeviceGetComputeRunningProcesses(self, h: SimpleNamespace) -> list[SimpleNamespace]:
        return self._procs(self._dev(h, "nvmlDeviceGetComputeRunningProcesses").compute)

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: SimpleNamespace) -> list[SimpleNamespace]:
        return self._procs(self._dev(h, "nvmlDeviceGetGraphicsRunningProcesses").graphics)

    # GPM: real ctypes structures; samples are distinct pointers so the fake can check which pair is used
    def nvmlGpmQueryDeviceSupport(self, h: SimpleNamespace) -> Any:
        support = pynvml.c_nvmlGpmSupport_t()
        support.isSupportedDevice = int(self._dev(h, "nvmlGpmQueryDeviceSupport").gpm is not None)
        return support

    def nvmlGpmSampleAlloc(self) -> Any:
        buf = ctypes.create_string_buffer(8)
        self._buffers.append(buf)
        return ctypes.cast(buf, pynvml.c_nvmlGpmSample_t)

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        self.freed_samples += 1

    def nvmlGpmSampleGet(self, h: SimpleNamespace, sample: Any) -> Any:
        self._dev(h, "nvmlGpmSampleGet")
        self._seq += 1
        self._sample_owner[self._addr(sample)] = (h.index, self._seq)
        return sample

    def nvmlGpmMetricsGet(self, req: Any) -> Any:
        assert req.version == pynvml.NVML_GPM_METRICS_GET_VERSION
        dev1, seq1 = self._sample_owner[self._addr(req.sample1)]
        dev2, seq2 = self._sample_owner[self._addr(req.sample2)]
        assert dev1 == dev2 and seq1 < seq2, "GPM metrics must be computed from an older and a newer sample"
        values = self.devices[dev2].gpm or {}
        for j in range(req.numMetrics):
            metric = req.metrics[j]
            if metric.metricId in values:
                metric.value = values[metric.metricId]
                metric.nvmlReturn = pynvml.NVML_SUCCESS
            else:
                metric.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return req

    # XID events
    def nvmlEventSetCreate(self) -> str:
        return "event-set"

    def nvmlEventSetFree(self, event_set: str) -> None:
        self.event_set_freed = True

    def nvmlDeviceGetSupportedEventTypes(self, h: SimpleNamespace) -> int:
        return self._dev(h, "nvmlDeviceGetSupportedEventTypes").events

    def nvmlDeviceRegisterEvents(self, h: SimpleNamespace, types: int, event_set: str) -> None:
        self._dev(h, "nvmlDeviceRegisterEvents")

    def nvmlEventSetWait(self, event_set: str, timeout_ms: int) -> SimpleNamespace:
        assert timeout_ms == 0, "the sampler must never block on events"
        if not self.events:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
        return self.events.pop(0)


def by_key(readings: list[Reading]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {(r.name, r.labels): r.value for r in readings}
    assert len(out) == len(readings)
    return out


def lab(gpu: int, uuid: str) -> tuple[tuple[str, str], ...]:
    return gm.device_labels(gpu, uuid)


def two_gpus(**second: Any) -> list[FakeDevice]:
    return [
        FakeDevice(),
        FakeDevice(uuid="GPU-11111111-1111-1111-1111-111111111111", bus_id=b"00000000:2A:00.0", **second),
    ]

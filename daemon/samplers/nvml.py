"""The NVML session of the GPU sampler; with nvml_calls.py, nvml_gpm.py and nvml_xid.py, the only modules that touch
NVML (the `pynvml` module of the nvidia-ml-py package).

Design, after nvitop's libnvml: every counter is read through `NvmlCalls.query`, which returns None instead of
raising, so one failing counter (NotSupported on this GPU, NoPermission, GpuIsLost, ...) makes that value absent
and never stops the sampling loop. The pynvml module is injected (constructor argument) so tests use a fake with
the real API names and error classes.

Sources per device and tick: utilization rates, memory info, power usage and enforced limit, total energy,
GPU temperature, SM and memory clocks, clocks event (throttle) reasons, volatile ECC totals, running compute and
graphics processes, GPM metrics (Hopper and newer: SM active, SM occupancy, tensor active, DRAM active and PCIe
throughput, as deltas between the previous and the current GPM sample), PCIe throughput from
nvmlDeviceGetPcieThroughput when GPM does not give it (that call samples a 20 ms window per direction), and XID
critical errors from an NVML event set drained without waiting (GPM: nvml_gpm.py, XID: nvml_xid.py).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from dyno.daemon.samplers import gpu_metrics as gm
from dyno.daemon.samplers.base import GpuDevice, GpuProcess
from dyno.daemon.samplers.nvml_calls import FAILED, LOST_ERROR, NvmlCalls
from dyno.daemon.samplers.nvml_gpm import Gpm
from dyno.daemon.samplers.nvml_xid import XidCount, XidEvents

__all__ = ["Nvml", "NvmlUnavailable", "NvmlDeviceSample", "load_pynvml", "FAILED"]

log = logging.getLogger(__name__)

_KIB = 1024

# nvmlInit failures -> the reason shown in status
_INIT_REASONS = {
    "NVMLError_LibraryNotFound": "NVML library libnvidia-ml.so.1 not found (no NVIDIA driver installed)",
    "NVMLError_DriverNotLoaded": "NVIDIA driver not loaded",
    "NVMLError_NoPermission": "no permission to access the NVIDIA driver",
    "NVMLError_LibRmVersionMismatch": "NVML library and kernel driver versions differ (reboot or reload driver)",
}


class NvmlUnavailable(Exception):
    """NVML cannot be used on this host; `reason` is one line for status."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class NvmlDeviceSample:
    """What could be read of one device in one tick. `values` maps gpu_metrics names to values in their units;
    `unavailable` maps a counter key to the reason it is missing (for diagnostics, e.g. bench/gpu_check.py)."""

    index: int
    values: Mapping[str, float]
    processes: tuple[GpuProcess, ...] = ()
    unavailable: Mapping[str, str] = field(default_factory=dict)


def load_pynvml() -> ModuleType:
    """Import pynvml, translating its absence into NvmlUnavailable."""
    try:
        return importlib.import_module("pynvml")
    except ImportError as exc:
        raise NvmlUnavailable(f"pynvml not importable ({exc}); install nvidia-ml-py") from exc


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


@dataclass(slots=True)
class _Device:
    index: int
    handle: Any
    info: GpuDevice
    gpm: Gpm | None = None
    xid: XidCount = field(default_factory=XidCount)
    lost: bool = False  # NVML said NVMLError_GpuIsLost at the last tick


class Nvml:
    """NVML session: `start()` initialises and discovers devices, `sample_all()` reads them, `shutdown()` frees
    everything. Not thread-safe: call it from the sampling thread only."""

    def __init__(self, module: ModuleType | Any | None = None) -> None:
        self._module = module
        self._m: Any = None
        self._calls = NvmlCalls(None)
        self._devices: list[_Device] = []
        self._xid: XidEvents | None = None
        self._started = False
        self.driver_version = ""

    # -- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> list[GpuDevice]:
        """Initialise NVML and return the inventory; raises NvmlUnavailable with a reason."""
        m = self._m = self._module if self._module is not None else load_pynvml()
        self._calls = NvmlCalls(m)
        try:
            m.nvmlInit()
        except m.NVMLError as exc:
            reason = _INIT_REASONS.get(type(exc).__name__, f"nvmlInit failed: {exc}")
            raise NvmlUnavailable(reason) from exc
        self._started = True
        try:
            count = m.nvmlDeviceGetCount()
            self.driver_version = _text(self._calls.call_optional("nvmlSystemGetDriverVersion") or "")
            self._devices = [self._open_device(i) for i in range(count)]
        except m.NVMLError as exc:
            self.shutdown()
            raise NvmlUnavailable(f"NVML device discovery failed: {exc}") from exc
        if not self._devices:
            self.shutdown()
            raise NvmlUnavailable("NVML initialised but found no GPUs")
        self._xid = XidEvents.set_up(self._calls, [(d.index, d.handle, d.xid) for d in self._devices])
        return self.inventory()

    def inventory(self) -> list[GpuDevice]:
        return [d.info for d in self._devices]

    def shutdown(self) -> None:
        """Free GPM samples and the event set, then nvmlShutdown. Safe to call twice."""
        if not self._started:
            return
        m = self._m
        for dev in self._devices:
            if dev.gpm is not None:
                dev.gpm.free(self._calls)
                dev.gpm = None
        if self._xid is not None:
            self._xid.free()
            self._xid = None
        try:
            m.nvmlShutdown()
        except m.NVMLError as exc:
            log.warning("nvmlShutdown failed: %s", exc)
        self._started = False

    # -- discovery ---------------------------------------------------------------------------------------

    def _open_device(self, index: int) -> _Device:
        q = self._calls.query
        handle = self._m.nvmlDeviceGetHandleByIndex(index)
        name = q(index, "name", "nvmlDeviceGetName", handle)
        uuid = q(index, "uuid", "nvmlDeviceGetUUID", handle)
        pci = q(index, "pci", "nvmlDeviceGetPciInfo", handle)
        mem = q(index, "memory", "nvmlDeviceGetMemoryInfo", handle)
        info = GpuDevice(
            index=index,
            name=_text(name) if name is not None else "unknown",
            uuid=_text(uuid) if uuid is not None else f"GPU-index-{index}",
            memory_total_bytes=int(mem.total) if mem is not None else 0,
            pci_bus_id=_text(getattr(pci, "busId", "")) if pci is not None else "",
        )
        return _Device(index=index, handle=handle, info=info, gpm=Gpm.set_up(self._calls, index, handle))

    # -- sampling ----------------------------------------------------------------------------------------

    def sample_all(self) -> list[NvmlDeviceSample]:
        """Read every device once. Never raises an NVML error."""
        if self._xid is not None:
            self._xid.drain()
        return [self._sample_device(dev) for dev in self._devices]

    def _sample_device(self, dev: _Device) -> NvmlDeviceSample:
        m, h, i, query = self._m, dev.handle, dev.index, self._calls.query
        v: dict[str, float] = {}
        miss: dict[str, str] = {}
        self._calls.lost.discard(i)  # this tick's calls tell whether it is lost

        util = query(i, "utilization", "nvmlDeviceGetUtilizationRates", h, missing=miss)
        if util is not None:
            v[gm.UTILIZATION] = float(util.gpu)
            v[gm.MEMORY_UTILIZATION] = float(util.memory)
        mem = query(i, "memory", "nvmlDeviceGetMemoryInfo", h, missing=miss)
        if mem is not None:
            v[gm.MEMORY_USED] = float(mem.used)
            v[gm.MEMORY_TOTAL] = float(mem.total)
        if self._lost(dev):  # every other call would fail the same way, each one a driver round trip
            v[gm.LOST] = 1.0
            if dev.xid.registered:  # events still arrive (Xid 79 is how the driver reports the loss)
                v[gm.XID_ERRORS] = float(dev.xid.count)
                if dev.xid.last is not None:
                    v[gm.LAST_XID] = float(dev.xid.last)
            return NvmlDeviceSample(index=i, values=v, unavailable=miss)
        v[gm.LOST] = 0.0
        power = query(i, "power", "nvmlDeviceGetPowerUsage", h, missing=miss)
        if power is not None:
            v[gm.POWER] = power / 1000.0  # mW
        limit = query(i, "power_limit", "nvmlDeviceGetEnforcedPowerLimit", h, missing=miss)
        if limit is not None:
            v[gm.POWER_LIMIT] = limit / 1000.0  # mW
        energy = query(i, "energy", "nvmlDeviceGetTotalEnergyConsumption", h, missing=miss)
        if energy is not None:
            v[gm.ENERGY] = energy / 1000.0  # mJ since driver load
        temp = query(i, "temperature", "nvmlDeviceGetTemperature", h, m.NVML_TEMPERATURE_GPU, missing=miss)
        if temp is not None:
            v[gm.TEMPERATURE] = float(temp)
        sm = query(i, "sm_clock", "nvmlDeviceGetClockInfo", h, m.NVML_CLOCK_SM, missing=miss)
        if sm is not None:
            v[gm.SM_CLOCK] = float(sm)
        memclk = query(i, "memory_clock", "nvmlDeviceGetClockInfo", h, m.NVML_CLOCK_MEM, missing=miss)
        if memclk is not None:
            v[gm.MEMORY_CLOCK] = float(memclk)
        reasons = self._throttle_reasons(dev, miss)
        if reasons is not None:
            v[gm.THROTTLE_REASONS] = float(reasons)
        for key, name, err_type in (
            ("ecc_corrected", gm.ECC_CORRECTED, "NVML_MEMORY_ERROR_TYPE_CORRECTED"),
            ("ecc_uncorrected", gm.ECC_UNCORRECTED, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"),
        ):
            count = query(
                i, key, "nvmlDeviceGetTotalEccErrors", h, getattr(m, err_type), m.NVML_VOLATILE_ECC, missing=miss
            )
            if count is not None:
                v[name] = float(count)
        if dev.xid.registered:
            v[gm.XID_ERRORS] = float(dev.xid.count)
            if dev.xid.last is not None:
                v[gm.LAST_XID] = float(dev.xid.last)
        else:
            miss["xid"] = self._calls.why_not(i, "xid", "XID events not registered")
        if dev.gpm is None:
            miss["gpm"] = self._calls.why_not(i, "gpm", "GPM not set up")
        else:
            dev.gpm.read(self._calls, i, h, v, miss)
        if gm.PCIE_TX not in v or gm.PCIE_RX not in v:
            for key, name, counter in (
                ("pcie_tx", gm.PCIE_TX, "NVML_PCIE_UTIL_TX_BYTES"),
                ("pcie_rx", gm.PCIE_RX, "NVML_PCIE_UTIL_RX_BYTES"),
            ):
                kbps = query(i, key, "nvmlDeviceGetPcieThroughput", h, getattr(m, counter), missing=miss)
                if kbps is not None:
                    v[name] = float(kbps) * _KIB  # NVML reports KB/s
        procs = self._processes(dev, miss)
        if procs is not None:
            v[gm.PROCESS_COUNT] = float(len(procs))
        return NvmlDeviceSample(index=i, values=v, processes=procs or (), unavailable=miss)

    def _lost(self, dev: _Device) -> bool:
        """Whether NVML reports the device lost this tick; the change is logged once each way (an operator must
        hear of a GPU fallen off the bus: its series vanish, and the sampler itself still works for the others)."""
        lost = dev.index in self._calls.lost
        if lost and not dev.lost:
            log.error(
                "gpu %d (%s, %s, PCI %s): NVML reports the GPU lost (%s: fallen off the bus? look for Xid 79 in the "
                "kernel log); its counters are absent and gpu_lost is 1 until the driver is reset or the host "
                "rebooted",
                dev.index,
                dev.info.name,
                dev.info.uuid,
                dev.info.pci_bus_id or "unknown",
                LOST_ERROR,
            )
        elif dev.lost and not lost:
            log.warning("gpu %d (%s): NVML answers again after the GPU was lost", dev.index, dev.info.uuid)
        dev.lost = lost
        return lost

    def _throttle_reasons(self, dev: _Device, miss: dict[str, str]) -> int | None:
        # "clocks event reasons" is the current name; the older "throttle reasons" call is the fallback for
        # drivers and bindings that predate it.
        fn = "nvmlDeviceGetCurrentClocksEventReasons"
        if getattr(self._m, fn, None) is None:
            fn = "nvmlDeviceGetCurrentClocksThrottleReasons"
        return self._calls.query(dev.index, "throttle_reasons", fn, dev.handle, missing=miss)

    def _processes(self, dev: _Device, miss: dict[str, str]) -> tuple[GpuProcess, ...] | None:
        found: dict[int, int] = {}
        any_ok = False
        for key, fn in (
            ("compute_processes", "nvmlDeviceGetComputeRunningProcesses"),
            ("graphics_processes", "nvmlDeviceGetGraphicsRunningProcesses"),
        ):
            procs = self._calls.query(dev.index, key, fn, dev.handle, missing=miss)
            if procs is None:
                continue
            any_ok = True
            for p in procs:
                used = getattr(p, "usedGpuMemory", None) or 0  # None when the driver cannot tell (WDDM, MIG)
                found[int(p.pid)] = max(found.get(int(p.pid), 0), int(used))
        if not any_ok:
            return None
        return tuple(GpuProcess(pid=pid, gpu_index=dev.index, used_memory_bytes=b) for pid, b in sorted(found.items()))

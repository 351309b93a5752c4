"""The only module that touches NVML (the `pynvml` module of the nvidia-ml-py package).

Design, after nvitop's libnvml: every counter is read through `Nvml.query`, which returns None instead of
raising, so one failing counter (NotSupported on this GPU, NoPermission, GpuIsLost, ...) makes that value
absent and never stops the sampling loop. Counters that can never work on a device (not supported, no
permission, function missing in this driver or binding) are remembered and not asked again, which keeps a tick
cheap. The pynvml module is injected (constructor argument) so tests use a fake with the real API names and
error classes.

Sources per device and tick: utilization rates, memory info, power usage and enforced limit, total energy,
GPU temperature, SM and memory clocks, clocks event (throttle) reasons, volatile ECC totals, running compute and
graphics processes, GPM metrics (Hopper and newer: SM active, SM occupancy, tensor active, DRAM active and PCIe
throughput, as deltas between the previous and the current GPM sample), PCIe throughput from
nvmlDeviceGetPcieThroughput when GPM does not give it (that call samples a 20 ms window per direction), and XID
critical errors from an NVML event set drained without waiting.
"""

from __future__ import annotations

import ctypes
import importlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from dyno.daemon.samplers import gpu_metrics as gm
from dyno.daemon.samplers.base import GpuDevice, GpuProcess

__all__ = ["Nvml", "NvmlUnavailable", "NvmlDeviceSample", "load_pynvml", "FAILED"]

log = logging.getLogger(__name__)

FAILED: Any = object()  # query()'s result for a failed call when None is a valid success value

_KIB = 1024
_MIB = 1024 * 1024
_MAX_EVENTS_PER_TICK = 256  # bound the XID drain so an event storm cannot stall a tick

# GPM metric id name (pynvml constant) -> (our metric name, scale to our unit)
_GPM_METRICS: tuple[tuple[str, str, float], ...] = (
    ("NVML_GPM_METRIC_SM_UTIL", gm.SM_ACTIVE, 1.0),
    ("NVML_GPM_METRIC_SM_OCCUPANCY", gm.SM_OCCUPANCY, 1.0),
    ("NVML_GPM_METRIC_ANY_TENSOR_UTIL", gm.TENSOR_ACTIVE, 1.0),
    ("NVML_GPM_METRIC_DRAM_BW_UTIL", gm.DRAM_ACTIVE, 1.0),
    ("NVML_GPM_METRIC_PCIE_TX_PER_SEC", gm.PCIE_TX, float(_MIB)),  # GPM reports MiB/s
    ("NVML_GPM_METRIC_PCIE_RX_PER_SEC", gm.PCIE_RX, float(_MIB)),
)

# Error class names (as pynvml generates them from NVML_ERROR_*) after which a counter is not asked again.
_PERMANENT_ERRORS = ("NVMLError_NotSupported", "NVMLError_NoPermission", "NVMLError_FunctionNotFound")

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


def _handle_key(handle: object) -> int:
    """A hashable identity for a device handle: the pointer value of real ctypes handles (event data carries a
    fresh pointer object for the same device), the object identity otherwise."""
    try:
        return int(ctypes.cast(handle, ctypes.c_void_p).value or 0)  # type: ignore[arg-type]
    except (TypeError, ctypes.ArgumentError):
        return id(handle)


@dataclass(slots=True)
class _Device:
    index: int
    handle: Any
    info: GpuDevice
    gpm_ids: tuple[tuple[int, str, float], ...] = ()  # (metric id, our name, scale)
    gpm_samples: list[Any] = field(default_factory=list)  # two samples, swapped each tick
    gpm_primed: bool = False
    gpm_request: Any = None
    xid_count: int = 0
    last_xid: int | None = None
    xid_registered: bool = False
    lost: bool = False  # NVML said NVMLError_GpuIsLost at the last tick


# The error NVML gives for every call on a GPU that fell off the bus (Xid 79) until the driver is reset
_LOST_ERROR = "NVMLError_GpuIsLost"


class Nvml:
    """NVML session: `start()` initialises and discovers devices, `sample_all()` reads them, `shutdown()` frees
    everything. Not thread-safe: call it from the sampling thread only."""

    def __init__(self, module: ModuleType | Any | None = None) -> None:
        self._module = module
        self._m: Any = None
        self._devices: list[_Device] = []
        self._skip: dict[tuple[int, str], str] = {}  # (device index, counter key) -> permanent reason
        self._logged: set[tuple[int, str]] = set()
        self._event_set: Any = None
        self._permanent: tuple[type[BaseException], ...] = ()
        self._started = False
        self.driver_version = ""

    # -- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> list[GpuDevice]:
        """Initialise NVML and return the inventory; raises NvmlUnavailable with a reason."""
        m = self._m = self._module if self._module is not None else load_pynvml()
        self._permanent = tuple(c for c in (getattr(m, n, None) for n in _PERMANENT_ERRORS) if isinstance(c, type))
        try:
            m.nvmlInit()
        except m.NVMLError as exc:
            reason = _INIT_REASONS.get(type(exc).__name__, f"nvmlInit failed: {exc}")
            raise NvmlUnavailable(reason) from exc
        self._started = True
        try:
            count = m.nvmlDeviceGetCount()
            self.driver_version = _text(self._call_optional("nvmlSystemGetDriverVersion") or "")
            self._devices = [self._open_device(i) for i in range(count)]
        except m.NVMLError as exc:
            self.shutdown()
            raise NvmlUnavailable(f"NVML device discovery failed: {exc}") from exc
        if not self._devices:
            self.shutdown()
            raise NvmlUnavailable("NVML initialised but found no GPUs")
        self._setup_xid_events()
        return self.inventory()

    def inventory(self) -> list[GpuDevice]:
        return [d.info for d in self._devices]

    def shutdown(self) -> None:
        """Free GPM samples and the event set, then nvmlShutdown. Safe to call twice."""
        if not self._started:
            return
        m = self._m
        for dev in self._devices:
            for s in dev.gpm_samples:
                self._call_optional("nvmlGpmSampleFree", s)
            dev.gpm_samples = []
        if self._event_set is not None:
            self._call_optional("nvmlEventSetFree", self._event_set)
            self._event_set = None
        try:
            m.nvmlShutdown()
        except m.NVMLError as exc:
            log.warning("nvmlShutdown failed: %s", exc)
        self._started = False

    # -- the query helper --------------------------------------------------------------------------------

    def query(
        self,
        index: int,
        key: str,
        fn_name: str,
        *args: Any,
        missing: dict[str, str] | None = None,
        default: Any = None,
    ) -> Any:
        """Call pynvml.<fn_name>(*args); `default` (and the reason in `missing[key]`) when it fails. Never
        raises an NVML error. Counters that can never work on this device are not called again. Pass
        default=FAILED for functions that return None on success."""
        skipped = self._skip.get((index, key))
        if skipped is not None:
            if missing is not None:
                missing[key] = skipped
            return default
        fn: Callable[..., Any] | None = getattr(self._m, fn_name, None)
        if fn is None:
            self._fail(index, key, f"{fn_name} not in this pynvml", True, missing)
            return default
        try:
            return fn(*args)
        except self._m.NVMLError as exc:
            self._fail(index, key, f"{type(exc).__name__}: {exc}", isinstance(exc, self._permanent), missing)
            return default

    def _fail(self, index: int, key: str, reason: str, permanent: bool, missing: dict[str, str] | None) -> None:
        if permanent:
            self._skip[(index, key)] = reason
        if missing is not None:
            missing[key] = reason
        # once per counter, not every tick; a lost GPU fails every counter: _sample_device says it once for the GPU
        if (index, key) not in self._logged and _LOST_ERROR not in reason:
            self._logged.add((index, key))
            log.info("gpu %d: %s unavailable: %s", index, key, reason)

    def _call_optional(self, fn_name: str, *args: Any) -> Any:
        return self.query(-1, fn_name, fn_name, *args)

    # -- discovery ---------------------------------------------------------------------------------------

    def _open_device(self, index: int) -> _Device:
        m = self._m
        handle = m.nvmlDeviceGetHandleByIndex(index)
        name = self.query(index, "name", "nvmlDeviceGetName", handle)
        uuid = self.query(index, "uuid", "nvmlDeviceGetUUID", handle)
        pci = self.query(index, "pci", "nvmlDeviceGetPciInfo", handle)
        mem = self.query(index, "memory", "nvmlDeviceGetMemoryInfo", handle)
        info = GpuDevice(
            index=index,
            name=_text(name) if name is not None else "unknown",
            uuid=_text(uuid) if uuid is not None else f"GPU-index-{index}",
            memory_total_bytes=int(mem.total) if mem is not None else 0,
            pci_bus_id=_text(getattr(pci, "busId", "")) if pci is not None else "",
        )
        dev = _Device(index=index, handle=handle, info=info)
        self._setup_gpm(dev)
        return dev

    def _setup_gpm(self, dev: _Device) -> None:
        m = self._m
        support = self.query(dev.index, "gpm", "nvmlGpmQueryDeviceSupport", dev.handle)
        if support is None or not getattr(support, "isSupportedDevice", 0):
            if support is not None:
                self._skip[(dev.index, "gpm")] = "GPM not supported by this device (needs Hopper or newer)"
            return
        ids = tuple((getattr(m, const), name, scale) for const, name, scale in _GPM_METRICS if hasattr(m, const))
        samples: list[Any] = []
        for _ in range(2):
            s = self.query(dev.index, "gpm", "nvmlGpmSampleAlloc")
            if s is None:
                for allocated in samples:
                    self._call_optional("nvmlGpmSampleFree", allocated)
                return
            samples.append(s)
        dev.gpm_ids, dev.gpm_samples = ids, samples
        req = m.c_nvmlGpmMetricsGet_t()  # allocated once per device and reused every tick
        req.version = m.NVML_GPM_METRICS_GET_VERSION
        req.numMetrics = len(ids)
        for j, (metric_id, _, _) in enumerate(ids):
            req.metrics[j].metricId = metric_id
        dev.gpm_request = req

    def _setup_xid_events(self) -> None:
        m = self._m
        xid_bit = getattr(m, "nvmlEventTypeXidCriticalError", 0)
        if not xid_bit:
            return
        event_set = self._call_optional("nvmlEventSetCreate")
        if event_set is None:
            return
        for dev in self._devices:
            supported = self.query(dev.index, "xid", "nvmlDeviceGetSupportedEventTypes", dev.handle)
            if supported is None or not supported & xid_bit:
                self._skip.setdefault((dev.index, "xid"), "XID events not supported")
                continue
            registered = self.query(
                dev.index, "xid", "nvmlDeviceRegisterEvents", dev.handle, xid_bit, event_set, default=FAILED
            )
            if registered is FAILED:
                # even a transient failure leaves this device out: a count that misses events would mislead
                self._skip.setdefault((dev.index, "xid"), "registering XID events failed")
                continue
            dev.xid_registered = True
        if any(d.xid_registered for d in self._devices):
            self._event_set = event_set
        else:
            self._call_optional("nvmlEventSetFree", event_set)

    # -- sampling ----------------------------------------------------------------------------------------

    def sample_all(self) -> list[NvmlDeviceSample]:
        """Read every device once. Never raises an NVML error."""
        self._drain_xid_events()
        return [self._sample_device(dev) for dev in self._devices]

    def _drain_xid_events(self) -> None:
        if self._event_set is None:
            return
        m = self._m
        by_handle = {_handle_key(d.handle): d for d in self._devices}
        for _ in range(_MAX_EVENTS_PER_TICK):
            try:
                data = m.nvmlEventSetWait(self._event_set, 0)  # 0 ms: return at once (NVMLError_Timeout) if none
            except m.NVMLError:
                return
            dev = by_handle.get(_handle_key(data.device))
            if dev is not None and data.eventType & m.nvmlEventTypeXidCriticalError:
                dev.xid_count += 1
                dev.last_xid = int(data.eventData)

    def _sample_device(self, dev: _Device) -> NvmlDeviceSample:
        m, h, i = self._m, dev.handle, dev.index
        v: dict[str, float] = {}
        miss: dict[str, str] = {}

        util = self.query(i, "utilization", "nvmlDeviceGetUtilizationRates", h, missing=miss)
        if util is not None:
            v[gm.UTILIZATION] = float(util.gpu)
            v[gm.MEMORY_UTILIZATION] = float(util.memory)
        mem = self.query(i, "memory", "nvmlDeviceGetMemoryInfo", h, missing=miss)
        if mem is not None:
            v[gm.MEMORY_USED] = float(mem.used)
            v[gm.MEMORY_TOTAL] = float(mem.total)
        if self._lost(dev, miss):  # every other call would fail the same way, each one a driver round trip
            v[gm.LOST] = 1.0
            if dev.xid_registered:  # events still arrive (Xid 79 is how the driver reports the loss)
                v[gm.XID_ERRORS] = float(dev.xid_count)
                if dev.last_xid is not None:
                    v[gm.LAST_XID] = float(dev.last_xid)
            return NvmlDeviceSample(index=i, values=v, unavailable=miss)
        v[gm.LOST] = 0.0
        power = self.query(i, "power", "nvmlDeviceGetPowerUsage", h, missing=miss)
        if power is not None:
            v[gm.POWER] = power / 1000.0  # mW
        limit = self.query(i, "power_limit", "nvmlDeviceGetEnforcedPowerLimit", h, missing=miss)
        if limit is not None:
            v[gm.POWER_LIMIT] = limit / 1000.0  # mW
        energy = self.query(i, "energy", "nvmlDeviceGetTotalEnergyConsumption", h, missing=miss)
        if energy is not None:
            v[gm.ENERGY] = energy / 1000.0  # mJ since driver load
        temp = self.query(i, "temperature", "nvmlDeviceGetTemperature", h, m.NVML_TEMPERATURE_GPU, missing=miss)
        if temp is not None:
            v[gm.TEMPERATURE] = float(temp)
        sm = self.query(i, "sm_clock", "nvmlDeviceGetClockInfo", h, m.NVML_CLOCK_SM, missing=miss)
        if sm is not None:
            v[gm.SM_CLOCK] = float(sm)
        memclk = self.query(i, "memory_clock", "nvmlDeviceGetClockInfo", h, m.NVML_CLOCK_MEM, missing=miss)
        if memclk is not None:
            v[gm.MEMORY_CLOCK] = float(memclk)
        reasons = self._throttle_reasons(dev, miss)
        if reasons is not None:
            v[gm.THROTTLE_REASONS] = float(reasons)
        for key, name, err_type in (
            ("ecc_corrected", gm.ECC_CORRECTED, "NVML_MEMORY_ERROR_TYPE_CORRECTED"),
            ("ecc_uncorrected", gm.ECC_UNCORRECTED, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"),
        ):
            count = self.query(
                i, key, "nvmlDeviceGetTotalEccErrors", h, getattr(m, err_type), m.NVML_VOLATILE_ECC, missing=miss
            )
            if count is not None:
                v[name] = float(count)
        if dev.xid_registered:
            v[gm.XID_ERRORS] = float(dev.xid_count)
            if dev.last_xid is not None:
                v[gm.LAST_XID] = float(dev.last_xid)
        else:
            miss["xid"] = self._skip.get((i, "xid"), "XID events not registered")
        self._sample_gpm(dev, v, miss)
        if gm.PCIE_TX not in v or gm.PCIE_RX not in v:
            for key, name, counter in (
                ("pcie_tx", gm.PCIE_TX, "NVML_PCIE_UTIL_TX_BYTES"),
                ("pcie_rx", gm.PCIE_RX, "NVML_PCIE_UTIL_RX_BYTES"),
            ):
                kbps = self.query(i, key, "nvmlDeviceGetPcieThroughput", h, getattr(m, counter), missing=miss)
                if kbps is not None:
                    v[name] = float(kbps) * _KIB  # NVML reports KB/s
        procs = self._processes(dev, miss)
        if procs is not None:
            v[gm.PROCESS_COUNT] = float(len(procs))
        return NvmlDeviceSample(index=i, values=v, processes=procs or (), unavailable=miss)

    def _lost(self, dev: _Device, miss: Mapping[str, str]) -> bool:
        """Whether NVML reports the device lost this tick; the change is logged once each way (an operator must
        hear of a GPU fallen off the bus: its series vanish, and the sampler itself still works for the others)."""
        lost = any(_LOST_ERROR in reason for reason in miss.values())
        if lost and not dev.lost:
            log.error(
                "gpu %d (%s, %s, PCI %s): NVML reports the GPU lost (%s: fallen off the bus? look for Xid 79 in the "
                "kernel log); its counters are absent and gpu_lost is 1 until the driver is reset or the host "
                "rebooted",
                dev.index,
                dev.info.name,
                dev.info.uuid,
                dev.info.pci_bus_id or "unknown",
                _LOST_ERROR,
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
        return self.query(dev.index, "throttle_reasons", fn, dev.handle, missing=miss)

    def _sample_gpm(self, dev: _Device, v: dict[str, float], miss: dict[str, str]) -> None:
        if not dev.gpm_samples:
            miss["gpm"] = self._skip.get((dev.index, "gpm"), "GPM not set up")
            return
        m = self._m
        prev, cur = dev.gpm_samples
        if self.query(dev.index, "gpm", "nvmlGpmSampleGet", dev.handle, cur, missing=miss, default=FAILED) is FAILED:
            dev.gpm_primed = False
            return
        dev.gpm_samples = [cur, prev]  # this sample becomes the previous one of the next tick
        if not dev.gpm_primed:
            dev.gpm_primed = True
            miss["gpm"] = "priming (first GPM sample)"
            return
        req = dev.gpm_request
        req.sample1, req.sample2 = prev, cur
        if self.query(dev.index, "gpm", "nvmlGpmMetricsGet", req, missing=miss, default=FAILED) is FAILED:
            return
        ok = getattr(m, "NVML_SUCCESS", 0)
        for j, (_, name, scale) in enumerate(dev.gpm_ids):
            metric = req.metrics[j]
            if metric.nvmlReturn == ok:
                v[name] = float(metric.value) * scale
            else:
                miss[f"gpm:{name}"] = self._error_text(metric.nvmlReturn)

    def _error_text(self, code: int) -> str:
        try:
            return f"{type(self._m.NVMLError(code)).__name__}: {self._m.NVMLError(code)}"
        except Exception:  # an unknown code whose string NVML cannot give
            return f"NVML error {code}"

    def _processes(self, dev: _Device, miss: dict[str, str]) -> tuple[GpuProcess, ...] | None:
        found: dict[int, int] = {}
        any_ok = False
        for key, fn in (
            ("compute_processes", "nvmlDeviceGetComputeRunningProcesses"),
            ("graphics_processes", "nvmlDeviceGetGraphicsRunningProcesses"),
        ):
            procs = self.query(dev.index, key, fn, dev.handle, missing=miss)
            if procs is None:
                continue
            any_ok = True
            for p in procs:
                used = getattr(p, "usedGpuMemory", None) or 0  # None when the driver cannot tell (WDDM, MIG)
                found[int(p.pid)] = max(found.get(int(p.pid), 0), int(used))
        if not any_ok:
            return None
        return tuple(GpuProcess(pid=pid, gpu_index=dev.index, used_memory_bytes=b) for pid, b in sorted(found.items()))

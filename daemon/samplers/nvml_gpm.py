"""GPM metrics of one device (Hopper and newer): SM active, SM occupancy, tensor active, DRAM active and PCIe
throughput, as deltas between the previous and the current GPM sample."""

from __future__ import annotations

from typing import Any

from dyno.daemon.samplers import gpu_metrics as gm
from dyno.daemon.samplers.nvml_calls import FAILED, NvmlCalls

__all__ = ["Gpm"]

_MIB = 1024 * 1024

# GPM metric id name (pynvml constant) -> (our metric name, scale to our unit)
_GPM_METRICS: tuple[tuple[str, str, float], ...] = (
    ("NVML_GPM_METRIC_SM_UTIL", gm.SM_ACTIVE, 1.0),
    ("NVML_GPM_METRIC_SM_OCCUPANCY", gm.SM_OCCUPANCY, 1.0),
    ("NVML_GPM_METRIC_ANY_TENSOR_UTIL", gm.TENSOR_ACTIVE, 1.0),
    ("NVML_GPM_METRIC_DRAM_BW_UTIL", gm.DRAM_ACTIVE, 1.0),
    ("NVML_GPM_METRIC_PCIE_TX_PER_SEC", gm.PCIE_TX, float(_MIB)),  # GPM reports MiB/s
    ("NVML_GPM_METRIC_PCIE_RX_PER_SEC", gm.PCIE_RX, float(_MIB)),
)


class Gpm:
    """Two GPM samples of one device, swapped each tick, and the metrics request reused every tick."""

    def __init__(self, ids: tuple[tuple[int, str, float], ...], samples: list[Any], request: Any) -> None:
        self._ids = ids  # (metric id, our name, scale)
        self._samples = samples
        self._request = request
        self._primed = False

    @classmethod
    def set_up(cls, calls: NvmlCalls, index: int, handle: Any) -> Gpm | None:
        """The device's GPM, or None when it has none (the reason stays with `calls` under the key "gpm")."""
        m = calls.m
        support = calls.query(index, "gpm", "nvmlGpmQueryDeviceSupport", handle)
        if support is None or not getattr(support, "isSupportedDevice", 0):
            if support is not None:
                calls.never_ask(index, "gpm", "GPM not supported by this device (needs Hopper or newer)")
            return None
        ids = tuple((getattr(m, const), name, scale) for const, name, scale in _GPM_METRICS if hasattr(m, const))
        samples: list[Any] = []
        for _ in range(2):
            s = calls.query(index, "gpm", "nvmlGpmSampleAlloc")
            if s is None:
                for allocated in samples:
                    calls.call_optional("nvmlGpmSampleFree", allocated)
                return None
            samples.append(s)
        req = m.c_nvmlGpmMetricsGet_t()
        req.version = m.NVML_GPM_METRICS_GET_VERSION
        req.numMetrics = len(ids)
        for j, (metric_id, _, _) in enumerate(ids):
            req.metrics[j].metricId = metric_id
        return cls(ids, samples, req)

    def read(self, calls: NvmlCalls, index: int, handle: Any, v: dict[str, float], miss: dict[str, str]) -> None:
        """Add this tick's GPM values to `v`, and to `miss` what could not be read; the first tick only primes."""
        prev, cur = self._samples
        if calls.query(index, "gpm", "nvmlGpmSampleGet", handle, cur, missing=miss, default=FAILED) is FAILED:
            self._primed = False
            return
        self._samples = [cur, prev]  # this sample becomes the previous one of the next tick
        if not self._primed:
            self._primed = True
            miss["gpm"] = "priming (first GPM sample)"
            return
        req = self._request
        req.sample1, req.sample2 = prev, cur
        if calls.query(index, "gpm", "nvmlGpmMetricsGet", req, missing=miss, default=FAILED) is FAILED:
            return
        ok = getattr(calls.m, "NVML_SUCCESS", 0)
        for j, (_, name, scale) in enumerate(self._ids):
            metric = req.metrics[j]
            if metric.nvmlReturn == ok:
                v[name] = float(metric.value) * scale
            else:
                miss[f"gpm:{name}"] = _error_text(calls.m, metric.nvmlReturn)

    def free(self, calls: NvmlCalls) -> None:
        for s in self._samples:
            calls.call_optional("nvmlGpmSampleFree", s)
        self._samples = []


def _error_text(m: Any, code: int) -> str:
    try:
        return f"{type(m.NVMLError(code)).__name__}: {m.NVMLError(code)}"
    except Exception:  # an unknown code whose string NVML cannot give
        return f"NVML error {code}"

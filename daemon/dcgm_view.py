"""The opt-in DCGM-compatible exposition (`dcgm_metrics`): the series dcgm-exporter exports by default that dyno's
GPU readings give, under dcgm-exporter's names, units, types and labels, so that dashboards and alerts written for
dcgm-exporter work unchanged on hosts without DCGM.

Names, types and units are those of dcgm-exporter's default counter list (etc/default-counters.csv): utilizations
in %, framebuffer in MiB, energy in mJ, clocks in MHz, DCGM_FI_PROF_* as ratios. Labels as its renderer spells them:
`gpu`, `UUID`, `pci_bus_id`, `device` (nvidia<index>), `modelName`, `Hostname`, and `hpc_job`: the id of the job
holding the GPU, from job accounting (dcgm-exporter's from its --hpc-job-mapping-dir files). A GPU held by several
jobs has each of its series once per job, as dcgm-exporter writes them; one no job holds has `hpc_job=""` (to
PromQL the same as no label, and every series of a family keeps one label set). What NVML cannot give, or dyno does
not sample (memory temperature, encoder/decoder utilization, PCIe replays, NVLink, remapped rows, the graphics
engine's activity, the driver-version label, MIG instance labels), is absent, as in dcgm-exporter on a GPU without
that field. A simulated GPU says so in these series too: its modelName ends in "(simulated)", its UUID starts
GPU-SIM-.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from prometheus_client.core import GaugeMetricFamily, Metric

from dyno.daemon.samplers import gpu_metrics as gm
from dyno.daemon.samplers.base import GpuDevice, Reading

__all__ = ["DcgmSeries", "DCGM_SERIES", "LABELS", "dcgm_families"]

LABELS: tuple[str, ...] = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "hpc_job")
_MIB = 1024.0**2


@dataclass(frozen=True, slots=True)
class DcgmSeries:
    """One dcgm-exporter series: the dyno reading it comes from, times `scale` and divided by `divisor` into `unit`
    (the unit its help text names in dcgm-exporter's list; "ratio" for 0-1, "B/s" for bytes per second)."""

    reading: str
    kind: Literal["gauge", "counter"]
    unit: str
    help: str
    scale: float = 1.0
    divisor: float = 1.0

    def value(self, reading_value: float) -> float:
        return reading_value * self.scale / self.divisor


DCGM_SERIES: Mapping[str, DcgmSeries] = {
    "DCGM_FI_DEV_SM_CLOCK": DcgmSeries(gm.SM_CLOCK, "gauge", "MHz", "SM clock frequency (in MHz)."),
    "DCGM_FI_DEV_MEM_CLOCK": DcgmSeries(gm.MEMORY_CLOCK, "gauge", "MHz", "Memory clock frequency (in MHz)."),
    "DCGM_FI_DEV_GPU_TEMP": DcgmSeries(gm.TEMPERATURE, "gauge", "C", "GPU temperature (in C)."),
    "DCGM_FI_DEV_POWER_USAGE": DcgmSeries(gm.POWER, "gauge", "W", "Power draw (in W)."),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": DcgmSeries(
        gm.ENERGY, "counter", "mJ", "Total energy consumption since boot (in mJ).", 1000.0
    ),
    "DCGM_FI_DEV_GPU_UTIL": DcgmSeries(gm.UTILIZATION, "gauge", "%", "GPU utilization (in %)."),
    "DCGM_FI_DEV_MEM_COPY_UTIL": DcgmSeries(gm.MEMORY_UTILIZATION, "gauge", "%", "Memory utilization (in %)."),
    "DCGM_FI_DEV_XID_ERRORS": DcgmSeries(gm.LAST_XID, "gauge", "", "Value of the last XID error encountered."),
    "DCGM_FI_DEV_FB_FREE": DcgmSeries(
        gm.MEMORY_TOTAL, "gauge", "MiB", "Framebuffer memory free (in MiB).", divisor=_MIB
    ),  # total - used: see _value
    "DCGM_FI_DEV_FB_USED": DcgmSeries(
        gm.MEMORY_USED, "gauge", "MiB", "Framebuffer memory used (in MiB).", divisor=_MIB
    ),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": DcgmSeries(
        gm.TENSOR_ACTIVE, "gauge", "ratio", "Ratio of cycles the tensor (HMMA) pipe is active.", divisor=100.0
    ),
    "DCGM_FI_PROF_DRAM_ACTIVE": DcgmSeries(
        gm.DRAM_ACTIVE,
        "gauge",
        "ratio",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        divisor=100.0,
    ),
    "DCGM_FI_PROF_PCIE_TX_BYTES": DcgmSeries(
        gm.PCIE_TX,
        "gauge",
        "B/s",
        "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in "
        "bytes per second.",
    ),
    "DCGM_FI_PROF_PCIE_RX_BYTES": DcgmSeries(
        gm.PCIE_RX,
        "gauge",
        "B/s",
        "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes "
        "per second.",
    ),
}


def _value(name: str, series: DcgmSeries, values: Mapping[str, float]) -> float | None:
    if name == "DCGM_FI_DEV_FB_FREE":
        total, used = values.get(gm.MEMORY_TOTAL), values.get(gm.MEMORY_USED)
        return None if total is None or used is None else series.value(total - used)
    if name == "DCGM_FI_DEV_XID_ERRORS" and gm.XID_ERRORS in values:
        return values.get(gm.LAST_XID, 0.0)  # DCGM reports 0 until an XID happens; dyno's series is absent then
    value = values.get(series.reading)
    return None if value is None else series.value(value)


class _Untyped(Metric):
    """A family whose one sample carries the family's own name, untyped. dcgm-exporter types its energy counter
    `counter` but names it without `_total`, which only the 0.0.4 text format it serves allows: in OpenMetrics (what
    Prometheus negotiates first, and what prometheus_client then writes) a counter's samples must end in `_total`,
    which would rename the series dashboards query. Untyped keeps the name in both formats; PromQL treats the
    series the same."""

    def __init__(self, name: str, documentation: str) -> None:
        super().__init__(name, documentation, "unknown")

    def add(self, labels: Mapping[str, str], value: float) -> None:
        self.add_sample(self.name, dict(labels), value)


def dcgm_families(
    readings: Iterable[Reading],
    devices: Sequence[GpuDevice],
    hostname: str,
    holders: Mapping[int, Sequence[str]] | None = None,
) -> list[Metric]:
    """The DCGM_FI_* families from one sample's GPU readings; a GPU missing from `devices` is left out. `holders`:
    GPU index -> the ids of the jobs holding it (job accounting's; None or absent: no job)."""
    holders = holders or {}
    per_gpu: dict[str, dict[str, float]] = {}
    for r in readings:
        if r.name.startswith("gpu_") and not any(k == "reason" for k, _ in r.labels):
            gpu = dict(r.labels).get("gpu")
            if gpu is not None:
                per_gpu.setdefault(gpu, {})[r.name] = r.value
    label_sets = [
        (
            per_gpu[str(d.index)],
            {
                "gpu": str(d.index),
                "UUID": d.uuid,
                "pci_bus_id": d.pci_bus_id,
                "device": f"nvidia{d.index}",
                "modelName": d.name,
                "Hostname": hostname,
                "hpc_job": job,
            },
        )
        for d in devices
        if str(d.index) in per_gpu
        for job in (holders.get(d.index) or ("",))
    ]
    out: list[Metric] = []
    for name, series in DCGM_SERIES.items():
        family: GaugeMetricFamily | _Untyped = (
            _Untyped(name, series.help)
            if series.kind == "counter"
            else GaugeMetricFamily(name, series.help, labels=LABELS)
        )
        for values, labels in label_sets:
            value = _value(name, series, values)
            if value is None:
                continue
            if isinstance(family, _Untyped):
                family.add(labels, value)
            else:
                family.add_metric([labels[k] for k in LABELS], value)
        if family.samples:
            out.append(family)
    return out

"""What each sampled reading is called in the Prometheus exposition, following Prometheus' naming guide: base units
(seconds, bytes, hertz, ratios 0-1), `_total` counters for cumulative counts, a HELP text saying what the series is.

The history and the gRPC API keep the samplers' names (`cpu_user_percent`, `net_rx_bytes_per_second`): they are one
tick's view. Prometheus computes rates itself over any window, so rates derived from kernel counters are not
exported: the counters are (`HostSampler.totals()`), and `rate()` over them is exact however sparse the scrapes.
Readings not listed in SERIES are not exported (RATE_READINGS says by what each one is replaced).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from dyno.daemon.samplers import gpu_metrics as gm

__all__ = ["PromSeries", "SERIES", "RATE_READINGS"]


@dataclass(frozen=True, slots=True)
class PromSeries:
    """The exported form of one reading: `name` without the `dyno_` prefix (a counter's without `_total`, which the
    exposition adds), its type, HELP text, and the conversion from the reading's unit to the base unit: times
    `scale`, divided by `divisor` (a percentage divided by 100 gives the ratio exactly, times 0.01 may not)."""

    name: str
    kind: Literal["gauge", "counter"]
    help: str
    scale: float = 1.0
    divisor: float = 1.0

    def value(self, reading_value: float) -> float:
        return reading_value * self.scale / self.divisor


def _gauge(name: str, help_text: str, scale: float = 1.0, divisor: float = 1.0) -> PromSeries:
    return PromSeries(name, "gauge", help_text, scale, divisor)


def _counter(name: str, help_text: str) -> PromSeries:
    return PromSeries(name, "counter", help_text)


_MHZ = 1e6

SERIES: Mapping[str, PromSeries] = {
    # host: cumulative counters (HostSampler.totals(), raw /proc values in base units)
    "cpu_seconds": _counter("cpu_seconds", "Seconds each CPU spent in each mode since boot (/proc/stat)"),
    "net_rx_bytes": _counter("net_rx_bytes", "Bytes received by the interface (/proc/net/dev)"),
    "net_tx_bytes": _counter("net_tx_bytes", "Bytes sent by the interface (/proc/net/dev)"),
    "net_rx_packets": _counter("net_rx_packets", "Packets received by the interface (/proc/net/dev)"),
    "net_tx_packets": _counter("net_tx_packets", "Packets sent by the interface (/proc/net/dev)"),
    "net_rx_errors": _counter("net_rx_errors", "Receive errors of the interface (/proc/net/dev)"),
    "net_tx_errors": _counter("net_tx_errors", "Transmit errors of the interface (/proc/net/dev)"),
    "net_rx_drops": _counter("net_rx_drops", "Received packets dropped by the interface (/proc/net/dev)"),
    "net_tx_drops": _counter("net_tx_drops", "Packets to send dropped by the interface (/proc/net/dev)"),
    "disk_read_bytes": _counter("disk_read_bytes", "Bytes read from the block device (/proc/diskstats)"),
    "disk_written_bytes": _counter("disk_written_bytes", "Bytes written to the block device (/proc/diskstats)"),
    "disk_reads_completed": _counter("disk_reads_completed", "Reads completed by the block device"),
    "disk_writes_completed": _counter("disk_writes_completed", "Writes completed by the block device"),
    "disk_io_time_seconds": _counter(
        "disk_io_time_seconds", "Seconds the block device had at least one I/O in flight (its rate is iostat %util)"
    ),
    # host: gauges from the newest sample
    "memory_total_bytes": _gauge("memory_total_bytes", "Physical memory (MemTotal)"),
    "memory_used_bytes": _gauge(
        "memory_used_bytes", "Memory not available to new allocations (MemTotal - MemAvailable)"
    ),
    "memory_available_bytes": _gauge("memory_available_bytes", "Memory available to new allocations (MemAvailable)"),
    "memory_used_percent": _gauge("memory_used_ratio", "Used memory as a fraction of MemTotal (0-1)", divisor=100.0),
    "load_average_1m": _gauge("load_average_1m", "1-minute load average (/proc/loadavg)"),
    "load_average_5m": _gauge("load_average_5m", "5-minute load average (/proc/loadavg)"),
    "load_average_15m": _gauge("load_average_15m", "15-minute load average (/proc/loadavg)"),
    "host_uptime_seconds": _gauge("host_uptime_seconds", "Seconds since the host booted (/proc/uptime)"),
    # GPU
    gm.UTILIZATION: _gauge(
        "gpu_utilization_ratio", "Fraction of the last sample period a kernel ran on the GPU (NVML, 0-1)", divisor=100.0
    ),
    gm.MEMORY_UTILIZATION: _gauge(
        "gpu_memory_utilization_ratio",
        "Fraction of the last sample period the GPU memory was read or written (NVML, 0-1)",
        divisor=100.0,
    ),
    gm.MEMORY_USED: _gauge("gpu_memory_used_bytes", "GPU memory allocated"),
    gm.MEMORY_TOTAL: _gauge("gpu_memory_total_bytes", "GPU memory installed"),
    gm.POWER: _gauge("gpu_power_watts", "GPU power draw"),
    gm.POWER_LIMIT: _gauge("gpu_power_limit_watts", "GPU power limit the driver enforces"),
    gm.ENERGY: _counter("gpu_energy_joules", "Energy the GPU consumed since the driver loaded"),
    gm.TEMPERATURE: _gauge("gpu_temperature_celsius", "GPU core temperature"),
    gm.SM_CLOCK: _gauge("gpu_sm_clock_hertz", "SM clock frequency", _MHZ),
    gm.MEMORY_CLOCK: _gauge("gpu_memory_clock_hertz", "Memory clock frequency", _MHZ),
    gm.PCIE_TX: _gauge("gpu_pcie_tx_bytes_per_second", "PCIe bytes the GPU sent per second, as measured by the GPU"),
    gm.PCIE_RX: _gauge(
        "gpu_pcie_rx_bytes_per_second", "PCIe bytes the GPU received per second, as measured by the GPU"
    ),
    gm.THROTTLE_REASONS: _gauge("gpu_throttle_reasons_bitmask", "NVML clocks event (throttle) reasons bitmask"),
    gm.THROTTLE_REASON_ACTIVE: _gauge("gpu_throttle_reason_active", "1 while the clocks are held back for `reason`"),
    gm.ECC_CORRECTED: _counter("gpu_ecc_corrected_errors", "Corrected ECC errors since the driver loaded"),
    gm.ECC_UNCORRECTED: _counter("gpu_ecc_uncorrected_errors", "Uncorrected ECC errors since the driver loaded"),
    gm.XID_ERRORS: _counter("gpu_xid_errors", "XID critical-error events seen since dynod started"),
    gm.LAST_XID: _gauge("gpu_last_xid", "Code of the most recent XID error"),
    gm.PROCESS_COUNT: _gauge("gpu_processes", "Processes running on the GPU"),
    gm.LOST: _gauge("gpu_lost", "1 while NVML reports the GPU lost (fallen off the bus), else 0"),
    gm.SM_ACTIVE: _gauge("gpu_sm_active_ratio", "Fraction of SM cycles with a warp resident (GPM, 0-1)", divisor=100.0),
    gm.SM_OCCUPANCY: _gauge(
        "gpu_sm_occupancy_ratio", "Resident warps as a fraction of the SMs' maximum (GPM, 0-1)", divisor=100.0
    ),
    gm.TENSOR_ACTIVE: _gauge(
        "gpu_tensor_active_ratio", "Fraction of cycles a tensor pipe was active (GPM, 0-1)", divisor=100.0
    ),
    gm.DRAM_ACTIVE: _gauge(
        "gpu_dram_active_ratio", "Fraction of cycles the memory interface was busy (GPM, 0-1)", divisor=100.0
    ),
}

# Readings that are rates over one sampling interval of a kernel counter: not exported, Prometheus computes them
# from the counter above. Each with the PromQL giving the reading's value (docs/METRICS.md lists the same).
RATE_READINGS: Mapping[str, str] = {
    "cpu_user_percent": 'cpu_seconds_total{mode=~"user|nice"}',
    "cpu_system_percent": 'cpu_seconds_total{mode=~"system|irq|softirq"}',
    "cpu_iowait_percent": 'cpu_seconds_total{mode="iowait"}',
    "cpu_idle_percent": 'cpu_seconds_total{mode="idle"}',
    "net_rx_bytes_per_second": "net_rx_bytes_total",
    "net_tx_bytes_per_second": "net_tx_bytes_total",
    "net_rx_packets_per_second": "net_rx_packets_total",
    "net_tx_packets_per_second": "net_tx_packets_total",
    "net_errors_per_second": "net_rx_errors_total + net_tx_errors_total",
    "net_drops_per_second": "net_rx_drops_total + net_tx_drops_total",
    "disk_read_bytes_per_second": "disk_read_bytes_total",
    "disk_write_bytes_per_second": "disk_written_bytes_total",
    "disk_reads_per_second": "disk_reads_completed_total",
    "disk_writes_per_second": "disk_writes_completed_total",
    "disk_busy_percent": "disk_io_time_seconds_total",
}

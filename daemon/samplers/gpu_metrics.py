"""GPU metric names and labels, shared by the real (NVML) and the simulated GPU sampler so both emit exactly the
same series. Units are in the names; every series carries gpu="<index>" and uuid="<uuid>" labels, and the
simulated backend adds simulated="true". docs/METRICS.md lists them all."""

from __future__ import annotations

from collections.abc import Mapping

from dyno.daemon.samplers.base import Labels, Reading, labels

__all__ = [
    "UTILIZATION",
    "MEMORY_UTILIZATION",
    "MEMORY_USED",
    "MEMORY_TOTAL",
    "POWER",
    "POWER_LIMIT",
    "ENERGY",
    "TEMPERATURE",
    "SM_CLOCK",
    "MEMORY_CLOCK",
    "PCIE_TX",
    "PCIE_RX",
    "THROTTLE_REASONS",
    "THROTTLE_REASON_ACTIVE",
    "ECC_CORRECTED",
    "ECC_UNCORRECTED",
    "XID_ERRORS",
    "LAST_XID",
    "PROCESS_COUNT",
    "LOST",
    "SM_ACTIVE",
    "SM_OCCUPANCY",
    "TENSOR_ACTIVE",
    "DRAM_ACTIVE",
    "GAUGE_METRICS",
    "COUNTER_METRICS",
    "THROTTLE_REASON_BITS",
    "device_labels",
    "device_readings",
]

UTILIZATION = "gpu_utilization_percent"
MEMORY_UTILIZATION = "gpu_memory_utilization_percent"
MEMORY_USED = "gpu_memory_used_bytes"
MEMORY_TOTAL = "gpu_memory_total_bytes"
POWER = "gpu_power_watts"
POWER_LIMIT = "gpu_power_limit_watts"
ENERGY = "gpu_energy_joules"
TEMPERATURE = "gpu_temperature_celsius"
SM_CLOCK = "gpu_sm_clock_mhz"
MEMORY_CLOCK = "gpu_memory_clock_mhz"
PCIE_TX = "gpu_pcie_tx_bytes_per_second"
PCIE_RX = "gpu_pcie_rx_bytes_per_second"
THROTTLE_REASONS = "gpu_throttle_reasons_bitmask"
THROTTLE_REASON_ACTIVE = "gpu_throttle_reason_active"
ECC_CORRECTED = "gpu_ecc_corrected_errors"
ECC_UNCORRECTED = "gpu_ecc_uncorrected_errors"
XID_ERRORS = "gpu_xid_errors"
LAST_XID = "gpu_last_xid"
PROCESS_COUNT = "gpu_processes"
LOST = "gpu_lost"  # 1 while NVML reports the GPU lost (NVMLError_GpuIsLost: fallen off the bus), else 0
SM_ACTIVE = "gpu_sm_active_percent"
SM_OCCUPANCY = "gpu_sm_occupancy_percent"
TENSOR_ACTIVE = "gpu_tensor_active_percent"
DRAM_ACTIVE = "gpu_dram_active_percent"

# Cumulative counts (monotonic while the daemon and the driver run): an exporter may type them as counters.
COUNTER_METRICS: frozenset[str] = frozenset({ENERGY, ECC_CORRECTED, ECC_UNCORRECTED, XID_ERRORS})
GAUGE_METRICS: frozenset[str] = frozenset(
    {
        UTILIZATION,
        MEMORY_UTILIZATION,
        MEMORY_USED,
        MEMORY_TOTAL,
        POWER,
        POWER_LIMIT,
        TEMPERATURE,
        SM_CLOCK,
        MEMORY_CLOCK,
        PCIE_TX,
        PCIE_RX,
        THROTTLE_REASONS,
        THROTTLE_REASON_ACTIVE,
        LAST_XID,
        PROCESS_COUNT,
        LOST,
        SM_ACTIVE,
        SM_OCCUPANCY,
        TENSOR_ACTIVE,
        DRAM_ACTIVE,
    }
)

# NVML's nvmlClocksEventReason* bits (stable ABI values of nvml.h), named for the `reason` label. Kept here
# rather than read from pynvml so the simulated backend needs no NVML at all.
THROTTLE_REASON_BITS: Mapping[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}


def device_labels(index: int, uuid: str, simulated: bool = False) -> Labels:
    """The labels of every series of one GPU."""
    if simulated:
        return labels(gpu=index, uuid=uuid, simulated="true")
    return labels(gpu=index, uuid=uuid)


_reason_labels: dict[Labels, tuple[tuple[int, Labels], ...]] = {}


def _reasons_for(base: Labels) -> tuple[tuple[int, Labels], ...]:
    # (bit, labels) per reason, built once per GPU: this runs every tick for every GPU
    cached = _reason_labels.get(base)
    if cached is None:
        cached = tuple((bit, tuple(sorted((*base, ("reason", r))))) for r, bit in THROTTLE_REASON_BITS.items())
        if len(_reason_labels) < 1024:  # bounded: GPUs are few and stable
            _reason_labels[base] = cached
    return cached


def device_readings(values: Mapping[str, float], base: Labels) -> list[Reading]:
    """Readings for one GPU from metric name -> value. The throttle bitmask is also expanded into one 0/1
    gpu_throttle_reason_active{reason=...} gauge per known reason."""
    out = [Reading(name, float(value), base) for name, value in values.items()]
    mask = values.get(THROTTLE_REASONS)
    if mask is not None:
        bits = int(mask)
        out.extend(Reading(THROTTLE_REASON_ACTIVE, 1.0 if bits & bit else 0.0, lab) for bit, lab in _reasons_for(base))
    return out

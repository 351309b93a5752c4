"""Simulated GPUs (`--gpu-backend sim`) for demos and tests on machines without NVIDIA GPUs.

Values are smooth functions of time (a slow training-like load wave plus a faster ripple, different per GPU),
deterministic for a given seed and clock, and physically consistent with each other: power, temperature,
clocks, PCIe traffic and the GPM-style activity metrics all follow the same load. The series and names are those
of the real sampler (gpu_metrics.py); everything is marked simulated: SamplerState.simulated, GpuDevice.simulated,
uuids "GPU-SIM-...", device names ending in "(simulated)", and a simulated="true" label on every reading.
No processes are invented: processes() is empty, because fake pids would be attributed to real processes. Job
accounting places the registered trainers (real processes) on these GPUs and sets the load of each GPU that holds one
(`hold_loads`): the trainers' own CPU busy share, so a starved trainer shows as a poorly used GPU.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from dyno.daemon.samplers import gpu_metrics as gm
from dyno.daemon.samplers.base import GpuDevice, GpuProcess, Reading, SamplerState

__all__ = ["SimGpuSampler", "MAX_SIM_GPUS"]

MAX_SIM_GPUS = 256
_GIB = 1024**3
_MEMORY_TOTAL = 80 * _GIB
_POWER_IDLE_W = 70.0
_POWER_LIMIT_W = 700.0
_SM_CLOCK_MAX_MHZ = 1980.0
_MEMORY_CLOCK_MHZ = 2619.0
_PCIE_PEAK_BYTES_PER_S = 8e9
_TAU = 2.0 * math.pi


@dataclass(frozen=True, slots=True)
class _Profile:
    """Per-GPU shape of the load curve, drawn once from the seed."""

    period_s: float
    ripple_period_s: float
    phase: float
    ripple_phase: float
    mean: float
    amplitude: float
    memory_fraction: float


class SimGpuSampler:
    """N simulated GPUs; `clock` is injectable so tests get exact, reproducible values."""

    name = "gpu"

    def __init__(self, n: int, seed: int = 0, clock: Callable[[], float] = time.monotonic) -> None:
        if not 1 <= n <= MAX_SIM_GPUS:
            raise ValueError(f"sim_gpus must be between 1 and {MAX_SIM_GPUS}, got {n}")
        self._clock = clock
        self._t0 = clock()
        rng = random.Random(seed)
        self._profiles = [
            _Profile(
                period_s=rng.uniform(90.0, 240.0),
                ripple_period_s=rng.uniform(7.0, 19.0),
                phase=rng.uniform(0.0, _TAU),
                ripple_phase=rng.uniform(0.0, _TAU),
                mean=rng.uniform(0.45, 0.7),
                amplitude=rng.uniform(0.2, 0.35),
                memory_fraction=rng.uniform(0.3, 0.85),
            )
            for _ in range(n)
        ]
        self._devices = [
            GpuDevice(
                index=i,
                name="NVIDIA H100 80GB HBM3 (simulated)",
                uuid=f"GPU-SIM-{seed & 0xFFFFFFFF:08x}-0000-0000-0000-{i:012x}",
                memory_total_bytes=_MEMORY_TOTAL,
                pci_bus_id=f"00000000:{0x18 + i:02X}:00.0",
                simulated=True,
            )
            for i in range(n)
        ]
        self._labels = [gm.device_labels(d.index, d.uuid, simulated=True) for d in self._devices]
        self._energy_j = [0.0] * n
        self._last_t: float | None = None
        self._held: dict[int, float] = {}

    def hold_loads(self, loads: dict[int, float]) -> None:
        """The load in [0, 1] of each GPU that holds a trainer, from the next sample on; the others follow the wave.
        Replaced whole (any thread)."""
        self._held = {i: min(1.0, max(0.0, v)) for i, v in loads.items() if 0 <= i < len(self._profiles)}

    def state(self) -> SamplerState:
        return SamplerState(name=self.name, ok=True, backend="sim", simulated=True)

    def inventory(self) -> list[GpuDevice]:
        return list(self._devices)

    def processes(self) -> list[GpuProcess]:
        return []

    def close(self) -> None:
        pass

    def _load(self, p: _Profile, t: float) -> float:
        """Load in [0, 1]: a slow wave (iterations, eval phases) plus a small fast ripple (steps)."""
        slow = p.mean + p.amplitude * math.sin(_TAU * t / p.period_s + p.phase)
        ripple = 0.08 * math.sin(_TAU * t / p.ripple_period_s + p.ripple_phase)
        return min(1.0, max(0.0, slow + ripple))

    def sample(self) -> list[Reading]:
        now = self._clock()
        t = now - self._t0
        dt = 0.0 if self._last_t is None else max(0.0, now - self._last_t)
        self._last_t = now
        out: list[Reading] = []
        held = self._held
        for i, p in enumerate(self._profiles):
            load = held[i] if i in held else self._load(p, t)
            lagged = held[i] if i in held else self._load(p, t - 20.0)  # temperature follows load with thermal inertia
            power = _POWER_IDLE_W + (_POWER_LIMIT_W - _POWER_IDLE_W) * load**0.9
            self._energy_j[i] += power * dt
            capped = power >= 0.97 * _POWER_LIMIT_W
            idle = load < 0.05
            sm_clock = 345.0 if idle else _SM_CLOCK_MAX_MHZ * (0.9 if capped else 1.0)
            reasons = (gm.THROTTLE_REASON_BITS["gpu_idle"] if idle else 0) | (
                gm.THROTTLE_REASON_BITS["sw_power_cap"] if capped else 0
            )
            memory_wave = 0.5 + 0.5 * math.sin(_TAU * t / (4 * p.period_s) + p.phase)
            memory_used = _MEMORY_TOTAL * min(0.98, p.memory_fraction * (0.9 + 0.1 * memory_wave))
            sm_active = 100.0 * load * 0.85
            values = {
                gm.UTILIZATION: round(100.0 * load),  # NVML reports whole percents
                gm.MEMORY_UTILIZATION: round(100.0 * load * 0.55),
                gm.MEMORY_USED: float(int(memory_used)),
                gm.MEMORY_TOTAL: float(_MEMORY_TOTAL),
                gm.POWER: power,
                gm.POWER_LIMIT: _POWER_LIMIT_W,
                gm.ENERGY: self._energy_j[i],
                gm.TEMPERATURE: float(round(32.0 + 45.0 * lagged)),
                gm.SM_CLOCK: sm_clock,
                gm.MEMORY_CLOCK: _MEMORY_CLOCK_MHZ,
                gm.PCIE_TX: _PCIE_PEAK_BYTES_PER_S * load * 0.2,
                gm.PCIE_RX: _PCIE_PEAK_BYTES_PER_S * load * (0.3 + 0.2 * memory_wave),
                gm.THROTTLE_REASONS: float(reasons),
                gm.ECC_CORRECTED: 0.0,
                gm.ECC_UNCORRECTED: 0.0,
                gm.XID_ERRORS: 0.0,
                gm.PROCESS_COUNT: 0.0,
                gm.LOST: 0.0,
                gm.SM_ACTIVE: sm_active,
                gm.SM_OCCUPANCY: sm_active * 0.45,
                gm.TENSOR_ACTIVE: sm_active * 0.6,
                gm.DRAM_ACTIVE: 100.0 * load * 0.5,
            }
            out.extend(gm.device_readings(values, self._labels[i]))
        return out

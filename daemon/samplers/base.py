"""The one small protocol every sampler implements, and the values samplers hand to the sampling loop."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = ["Reading", "SamplerState", "GpuDevice", "Sampler", "labels"]

Labels = tuple[tuple[str, str], ...]


def labels(**kv: object) -> Labels:
    """Canonical (sorted) label tuple, so equal label sets compare and hash equal."""
    return tuple(sorted((k, str(v)) for k, v in kv.items()))


@dataclass(frozen=True, slots=True)
class Reading:
    """One value of one metric at one tick. `name` carries the unit (gpu_power_watts, net_rx_bytes_per_second)."""

    name: str
    value: float
    labels: Labels = ()


@dataclass(frozen=True, slots=True)
class SamplerState:
    """What status shows for a sampler: ok, or unavailable with a reason."""

    name: str
    ok: bool
    backend: str
    reason: str = ""
    simulated: bool = False


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """Inventory entry of one GPU (static over the daemon's life)."""

    index: int
    name: str
    uuid: str
    memory_total_bytes: int
    pci_bus_id: str = ""
    simulated: bool = False


@runtime_checkable
class Sampler(Protocol):
    """A source of readings. `sample()` is called once per tick from the sampling thread and must not raise
    for a single failing counter: that value is simply absent from the result."""

    name: str

    def state(self) -> SamplerState: ...

    def sample(self) -> list[Reading]: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process holding memory on a GPU (NVML's running compute/graphics processes)."""

    pid: int
    gpu_index: int
    used_memory_bytes: int = field(default=0)

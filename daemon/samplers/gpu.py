"""GPU samplers behind the Sampler protocol: the real one over NVML, the unavailable/disabled one, and the
factory that picks by `--gpu-backend`. The simulated one lives in gpu_sim.py.

Every GPU sampler also offers `inventory() -> list[GpuDevice]` and `processes() -> list[GpuProcess]`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from dyno.daemon.samplers import gpu_metrics as gm
from dyno.daemon.samplers.base import GpuDevice, GpuProcess, Reading, Sampler, SamplerState
from dyno.daemon.samplers.nvml import Nvml, NvmlDeviceSample, NvmlUnavailable

__all__ = ["GpuSampler", "NullGpuSampler", "make_gpu_sampler", "GPU_BACKENDS"]

log = logging.getLogger(__name__)

GPU_BACKENDS = ("auto", "nvml", "sim", "none")
# nvmlInit and device discovery take well under a second; far longer means a GPU that fell off the bus or a wedged
# driver, where they may block for minutes while dynod is not ready (systemd then times the start out, with nothing
# in the journal from dynod to say where it stood)
NVML_SLOW_START_S = 10.0


class NullGpuSampler:
    """A GPU sampler that has nothing to report: NVML missing (state explains why) or disabled."""

    name = "gpu"

    def __init__(self, reason: str, backend: str) -> None:
        self._state = SamplerState(name=self.name, ok=False, backend=backend, reason=reason)

    def state(self) -> SamplerState:
        return self._state

    def inventory(self) -> list[GpuDevice]:
        return []

    def processes(self) -> list[GpuProcess]:
        return []

    def sample(self) -> list[Reading]:
        return []

    def close(self) -> None:
        pass


class GpuSampler:
    """Real GPUs through an already started `Nvml` session (see `make_gpu_sampler`)."""

    name = "gpu"

    def __init__(self, nvml: Nvml, backend: str = "nvml") -> None:
        self._nvml = nvml
        self._backend = backend
        self._inventory = nvml.inventory()
        self._labels = {d.index: gm.device_labels(d.index, d.uuid) for d in self._inventory}
        self._processes: list[GpuProcess] | None = None
        self._last: list[NvmlDeviceSample] = []
        self._closed = False

    def state(self) -> SamplerState:
        if self._closed:
            return SamplerState(name=self.name, ok=False, backend=self._backend, reason="closed")
        return SamplerState(name=self.name, ok=True, backend=self._backend)

    def inventory(self) -> list[GpuDevice]:
        return list(self._inventory)

    def processes(self) -> list[GpuProcess]:
        """Processes holding GPU memory as of the last `sample()` (pid, GPU index, bytes); a process using
        several GPUs appears once per GPU. Empty before the first sample: NVML is only driven from the
        sampling thread, so this may be called from any thread."""
        return list(self._processes or [])

    def last_device_samples(self) -> list[NvmlDeviceSample]:
        """The raw per-device results of the last sample, including why counters were unavailable."""
        return list(self._last)

    def sample(self) -> list[Reading]:
        if self._closed:
            return []
        # NVML errors are handled per counter inside Nvml; anything else propagates to the sampling loop, which
        # logs it once and reports this sampler down until it works again
        samples = self._nvml.sample_all()
        self._last = samples
        out: list[Reading] = []
        procs: list[GpuProcess] = []
        for s in samples:
            out.extend(gm.device_readings(s.values, self._labels[s.index]))
            procs.extend(s.processes)
        self._processes = procs  # replaced whole, so readers on other threads see one consistent list
        return out

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._nvml.shutdown()


def make_gpu_sampler(
    backend: str,
    sim_gpus: int = 8,
    *,
    pynvml_module: ModuleType | Any | None = None,
    sim_seed: int = 0,
    clock: Callable[[], float] = time.monotonic,
) -> Sampler:
    """The GPU sampler for `--gpu-backend`: auto | nvml | sim | none.

    auto and nvml both use NVML when it initialises and otherwise return a sampler whose state is
    unavailable with the reason (the daemon runs on); auto never falls back to the simulator.
    """
    if backend not in GPU_BACKENDS:
        raise ValueError(f"gpu backend must be one of {', '.join(GPU_BACKENDS)}, got {backend!r}")
    if backend == "none":
        return NullGpuSampler("disabled by --gpu-backend none", backend)
    if backend == "sim":
        from dyno.daemon.samplers.gpu_sim import SimGpuSampler

        return SimGpuSampler(sim_gpus, seed=sim_seed, clock=clock)
    nvml = Nvml(pynvml_module)
    slow = threading.Timer(
        NVML_SLOW_START_S,
        log.warning,
        ("NVML initialisation has not returned after %.0f s (a GPU fallen off the bus or a wedged driver? see the "
         "kernel log for Xid errors); dynod is not ready until it does", NVML_SLOW_START_S),
    )  # fmt: skip
    slow.daemon = True
    slow.start()
    try:
        nvml.start()
    except NvmlUnavailable as exc:
        log.debug("NVML unavailable: %s", exc.reason)  # the daemon logs the sampler's state (one line, not two)
        return NullGpuSampler(exc.reason, backend)
    finally:
        slow.cancel()
    return GpuSampler(nvml, backend)

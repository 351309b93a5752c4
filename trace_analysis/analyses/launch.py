"""Kernel launch statistics and the launch queue (HTA's ``get_cuda_kernel_launch_stats`` and queue length).

For every GPU row launched by a runtime call (cudaLaunchKernel, cudaMemcpyAsync, ...; joined by correlation id):
cpu_duration = runtime call duration, gpu_duration = GPU duration, launch_delay = max(0, GPU start - runtime end).
Short kernels: cpu_duration <= ``runtime_cutoff_us`` and gpu_duration < cpu_duration (the launch costs more than the
work). Runtime outliers: cpu_duration > ``runtime_cutoff_us``.
Delay outliers: launch_delay > ``launch_delay_cutoff_us``.

Queue length per stream (HTA): +1 at each launch call's start, -1 at its GPU row's start; a step function whose
maximum says how deep the host ran ahead of the GPU (1024 outstanding launches stall the CPU). A stream is the
pair (device, stream id): two devices of a multi-GPU trace can both have a stream 7 (HTA keys by stream id alone).
"""

from __future__ import annotations

import msgspec
import numpy as np

from dyno.trace_analysis.analyses.arrays import flatnonzero, readonly
from dyno.trace_analysis.analyses.gpu import gpu_scope, is_launch_name, one_device
from dyno.trace_analysis.model import Cat, Trace

__all__ = ["LaunchStats", "QueueLength", "launch_stats", "queue_length"]


class LaunchStats(msgspec.Struct, frozen=True):
    rank: int
    n_launches: int
    # per launch (rows of the GPU scope with a launching runtime call)
    gpu_row: np.ndarray  # row in trace.events of the GPU event
    runtime_row: np.ndarray  # row in trace.events of the runtime call
    cpu_duration: np.ndarray
    gpu_duration: np.ndarray
    launch_delay: np.ndarray
    runtime_cutoff_us: float
    launch_delay_cutoff_us: float

    @property
    def short_kernels(self) -> np.ndarray:
        """Mask: the launch took longer than the GPU work (and the launch itself was not slow)."""
        return (self.cpu_duration <= self.runtime_cutoff_us) & (self.gpu_duration < self.cpu_duration)

    @property
    def runtime_outliers(self) -> np.ndarray:
        return self.cpu_duration > self.runtime_cutoff_us

    @property
    def delay_outliers(self) -> np.ndarray:
        return self.launch_delay > self.launch_delay_cutoff_us

    @property
    def short_kernel_share(self) -> float:
        return float(self.short_kernels.mean()) if self.n_launches else 0.0

    @property
    def mean_launch_delay_us(self) -> float:
        return float(self.launch_delay.mean()) if self.n_launches else 0.0


def launch_stats(
    trace: Trace,
    *,
    runtime_cutoff_us: float = 50.0,
    launch_delay_cutoff_us: float = 100.0,
    include_last_step: bool = False,
    hta_ns_rounding: bool = False,
) -> LaunchStats:
    """Per-launch statistics (see the module docstring). Cached on the trace; treat the arrays as read-only."""
    key = ("launch_stats", runtime_cutoff_us, launch_delay_cutoff_us, include_last_step, hta_ns_rounding)
    return trace.cached(
        key,
        lambda: _launch_stats(trace, runtime_cutoff_us, launch_delay_cutoff_us, include_last_step, hta_ns_rounding),
    )


def _launched(trace: Trace, include_last_step: bool, hta_ns_rounding: bool) -> np.ndarray:
    """Mask over the GPU scope's rows: launched by one of LAUNCH_NAMES (shared by launch stats and the queue)."""

    def compute() -> np.ndarray:
        scope = gpu_scope(trace, include_last_step, hta_ns_rounding)
        has = scope.launch >= 0
        has[has] = is_launch_name(trace)[trace.events.name[scope.launch[has]]]
        readonly(has)
        return has

    return trace.cached(("launched", include_last_step, hta_ns_rounding), compute)


def _launch_stats(
    trace: Trace,
    runtime_cutoff_us: float,
    launch_delay_cutoff_us: float,
    include_last_step: bool,
    hta_ns_rounding: bool,
) -> LaunchStats:
    scope = gpu_scope(trace, include_last_step, hta_ns_rounding)
    has = _launched(trace, include_last_step, hta_ns_rounding) & (scope.rows.cat != Cat.CUDA_SYNC.value)
    cpu_dur = scope.launch_end[has] - scope.launch_ts[has]
    gpu_dur = scope.end[has] - scope.ts[has]
    delay = np.maximum(scope.ts[has] - scope.launch_end[has], 0.0)  # np.clip(x, 0.0, None) runs exactly this
    gpu_row, runtime_row = scope.rows.index[has], scope.launch[has]
    readonly(gpu_row, runtime_row, cpu_dur, gpu_dur, delay)
    return LaunchStats(
        rank=trace.rank,
        n_launches=int(has.sum()),
        gpu_row=gpu_row,
        runtime_row=runtime_row,
        cpu_duration=cpu_dur,
        gpu_duration=gpu_dur,
        launch_delay=delay,
        runtime_cutoff_us=runtime_cutoff_us,
        launch_delay_cutoff_us=launch_delay_cutoff_us,
    )


class QueueLength(msgspec.Struct, frozen=True):
    """Launch-queue length over time: concatenated per-stream step functions (sorted by device, stream, then time).

    ``max_by_device_stream``: the peak per (device, stream); ``max_by_stream``: per stream id, the highest peak
    of the devices' streams with that id (HTA's key; the same with one device)."""

    rank: int
    stream: np.ndarray
    ts: np.ndarray
    length: np.ndarray
    max_by_stream: dict[int, int]
    device: np.ndarray = msgspec.field(default_factory=lambda: np.empty(0, np.int64))
    max_by_device_stream: dict[tuple[int, int], int] = msgspec.field(default_factory=dict)

    @property
    def max_length(self) -> int:
        return max(self.max_by_stream.values(), default=0)

    @property
    def max_stream(self) -> int | None:
        if not self.max_by_stream:
            return None
        return max(self.max_by_stream, key=lambda s: self.max_by_stream[s])

    @property
    def max_device_stream(self) -> tuple[int, int] | None:
        """(device, stream) of the longest queue (the first such in order)."""
        if not self.max_by_device_stream:
            return None
        return max(self.max_by_device_stream, key=lambda k: self.max_by_device_stream[k])


def queue_length(trace: Trace, *, include_last_step: bool = False, hta_ns_rounding: bool = False) -> QueueLength:
    """Launch-queue length per stream (see the module docstring). Cached on the trace; arrays read-only."""
    key = ("queue_length", include_last_step, hta_ns_rounding)
    return trace.cached(key, lambda: _queue_length(trace, include_last_step, hta_ns_rounding))


def _queue_length(trace: Trace, include_last_step: bool, hta_ns_rounding: bool) -> QueueLength:
    scope = gpu_scope(trace, include_last_step, hta_ns_rounding)
    has = _launched(trace, include_last_step, hta_ns_rounding)
    n = int(has.sum())
    stream = np.concatenate((scope.rows.stream[has], scope.rows.stream[has]))
    ts = np.concatenate((scope.launch_ts[has], scope.ts[has]))
    delta = np.concatenate((np.ones(n, np.int64), -np.ones(n, np.int64)))
    # by (device,) stream, then time; at equal times the enqueue comes first (it is listed first: stable sort)
    several = len(scope.devices) > 1
    if several:
        device = np.concatenate((scope.device[has], scope.device[has]))
        order = np.lexsort((ts, stream, device))
        device = device[order]
    else:
        order = np.lexsort((ts, stream))
        device = one_device(scope.devices[0] if scope.devices else 0, 2 * n)
    stream, ts, delta = stream[order], ts[order], delta[order]
    length = np.empty(len(delta), dtype=np.int64)
    max_by: dict[int, int] = {}
    max_by_dev: dict[tuple[int, int], int] = {}
    if len(delta):
        new = stream[1:] != stream[:-1]  # np.diff(stream) != 0
        if several:
            new |= device[1:] != device[:-1]
        bounds = flatnonzero(new) + 1
        starts = np.concatenate(([0], bounds))
        ends = np.concatenate((bounds, [len(delta)]))
        csum = delta.cumsum()
        base = np.concatenate(([0], csum[starts[1:] - 1])) if len(starts) > 1 else np.array([0])
        length = csum - np.repeat(base, ends - starts)
        peaks = np.maximum.reduceat(length, starts)
        for s, p in zip(starts.tolist(), peaks.tolist(), strict=True):
            key = (int(device[s]), int(stream[s]))
            max_by_dev[key] = int(p)
            max_by[key[1]] = max(max_by[key[1]], int(p)) if key[1] in max_by else int(p)
    readonly(stream, ts, length)
    return QueueLength(
        rank=trace.rank,
        stream=stream,
        ts=ts,
        length=length,
        max_by_stream=max_by,
        device=device,
        max_by_device_stream=max_by_dev,
    )

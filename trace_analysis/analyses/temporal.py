"""Temporal breakdown: how the GPU's time splits into idle, compute, non-compute and communication.

Definitions (HTA's ``get_temporal_breakdown``): span = first GPU activity start to last GPU activity end;
idle = span - union of GPU rows; compute = union of COMPUTATION kernels; non-compute = busy - compute;
communication = union of NCCL kernels (part of non-compute). By default ``cuda_sync`` rows count as busy (as in
HTA) so figures match HTA; ``sync_is_busy=False`` gives dyno's stricter figure (a sync row is the host waiting,
not GPU work). Times are µs; shares are fractions of the span (0..1).

Several GPUs in one trace (one process driving cuda:0 and cuda:1): each device is broken down on its own over the
rank's span (``devices``), and the rank's figures are their mean: one GPU busy while the other idles is 50% busy,
not 100% (HTA pools the devices' kernels into one union). With one device both are HTA's figures.
"""

from __future__ import annotations

import msgspec
import numpy as np

from dyno.trace_analysis.analyses.gpu import KernelType, device_groups, gpu_scope, scope_kernel_types
from dyno.trace_analysis.analyses.intervals import union_length
from dyno.trace_analysis.model import Trace

__all__ = ["DeviceTime", "TemporalBreakdown", "temporal_breakdown"]


class DeviceTime(msgspec.Struct, frozen=True):
    """One GPU's time over the rank's GPU span (µs): busy + idle = the span."""

    device: int
    busy_us: float
    idle_us: float
    compute_us: float
    non_compute_us: float
    communication_us: float
    memory_us: float
    n_gpu_events: int


class TemporalBreakdown(msgspec.Struct, frozen=True):
    """The rank's breakdown; with several devices the µs figures are the mean over ``devices`` (module docstring)."""

    rank: int
    span_us: float
    busy_us: float
    idle_us: float
    compute_us: float
    non_compute_us: float
    communication_us: float
    memory_us: float
    n_gpu_events: int
    devices: tuple[DeviceTime, ...] = ()

    @property
    def n_devices(self) -> int:
        return len(self.devices)

    def _share(self, v: float) -> float:
        return v / self.span_us if self.span_us > 0 else 0.0

    @property
    def idle_share(self) -> float:
        return self._share(self.idle_us)

    @property
    def compute_share(self) -> float:
        return self._share(self.compute_us)

    @property
    def non_compute_share(self) -> float:
        return self._share(self.non_compute_us)

    @property
    def communication_share(self) -> float:
        return self._share(self.communication_us)

    @property
    def has_gpu(self) -> bool:
        return self.n_gpu_events > 0


def temporal_breakdown(
    trace: Trace, *, sync_is_busy: bool = True, include_last_step: bool = False, hta_ns_rounding: bool = False
) -> TemporalBreakdown:
    """Breakdown of one rank (per device, their mean for the rank); see the module docstring. Cached on the trace."""
    key = ("temporal_breakdown", sync_is_busy, include_last_step, hta_ns_rounding)
    return trace.cached(key, lambda: _temporal_breakdown(trace, sync_is_busy, include_last_step, hta_ns_rounding))


def _temporal_breakdown(
    trace: Trace, sync_is_busy: bool, include_last_step: bool, hta_ns_rounding: bool
) -> TemporalBreakdown:
    scope = gpu_scope(trace, include_last_step, hta_ns_rounding)
    kt_all = scope_kernel_types(trace, include_last_step, hta_ns_rounding)
    kt, ts, end = kt_all, scope.ts, scope.end
    sync_kt = kt_all[:0]
    if not sync_is_busy:
        sel = scope.is_activity
        kt, ts, end = kt[sel], ts[sel], end[sel]
        sync_kt = kt_all[~sel]
    n = len(ts)
    if not n:
        return TemporalBreakdown(trace.rank, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0)
    span = float(end.max() - ts.min())
    device = scope.devices[0]
    if len(scope.devices) > 1:
        groups = device_groups(scope.device if sync_is_busy else scope.device[scope.is_activity])
        if len(groups) > 1:
            return _per_device(trace.rank, span, groups, kt, ts, end)
        device = groups[0][0]
    busy = union_length(ts, end)

    def typed(code: int) -> float:
        """Union of one kernel type's rows. When no cuda_sync row has that type, both busy definitions select the
        same rows in the same order: the two breakdowns (HTA's and the report's) share one computation."""

        def compute() -> float:
            m = kt == code
            return union_length(ts[m], end[m])

        subset = "activity" if (sync_kt == code).any() else "all"
        return float(trace.cached(("temporal_type_union", include_last_step, hta_ns_rounding, code, subset), compute))

    compute = typed(KernelType.COMPUTATION.value)
    comm, memory = typed(KernelType.COMMUNICATION.value), typed(KernelType.MEMORY.value)
    return TemporalBreakdown(
        rank=trace.rank,
        span_us=span,
        busy_us=busy,
        idle_us=span - busy,
        compute_us=compute,
        non_compute_us=busy - compute,
        communication_us=comm,
        memory_us=memory,
        n_gpu_events=n,
        devices=(DeviceTime(device, busy, span - busy, compute, busy - compute, comm, memory, n),),
    )


def _per_device(
    rank: int,
    span: float,
    groups: list[tuple[int, np.ndarray | None]],
    kt: np.ndarray,
    ts: np.ndarray,
    end: np.ndarray,
) -> TemporalBreakdown:
    """Several devices: each one's unions over the common span, and their mean as the rank's figures."""
    devices = []
    for d, sel in groups:
        d_kt, d_ts, d_end = kt[sel], ts[sel], end[sel]
        busy = union_length(d_ts, d_end)

        def typed(code: int, d_kt: np.ndarray = d_kt, d_ts: np.ndarray = d_ts, d_end: np.ndarray = d_end) -> float:
            m = d_kt == code
            return union_length(d_ts[m], d_end[m])

        compute = typed(KernelType.COMPUTATION.value)
        devices.append(
            DeviceTime(
                d,
                busy,
                span - busy,
                compute,
                busy - compute,
                typed(KernelType.COMMUNICATION.value),
                typed(KernelType.MEMORY.value),
                len(d_ts),
            )
        )
    k = len(devices)

    def mean(field: str) -> float:
        return sum(float(getattr(dt, field)) for dt in devices) / k

    return TemporalBreakdown(
        rank=rank,
        span_us=span,
        busy_us=mean("busy_us"),
        idle_us=mean("idle_us"),
        compute_us=mean("compute_us"),
        non_compute_us=mean("non_compute_us"),
        communication_us=mean("communication_us"),
        memory_us=mean("memory_us"),
        n_gpu_events=len(ts),
        devices=tuple(devices),
    )

"""Communication–computation overlap (HTA's ``get_comm_comp_overlap``).

overlap = |union(COMPUTATION kernels) ∩ union(NCCL kernels)| / |union(NCCL kernels)|. HTA reports NaN when there
is no communication; dyno reports ``None`` (and ``has_communication`` False). Exposed communication =
communication time not hidden by compute.

Several GPUs in one trace: each device's communication is overlapped only by its own computation (a kernel on
cuda:0 hides nothing of an NCCL kernel on cuda:1); the rank's µs figures are the mean over the devices
(``devices`` holds each), as in ``temporal``. HTA intersects the pooled unions.
"""

from __future__ import annotations

import msgspec
import numpy as np

from dyno.trace_analysis.analyses.gpu import KernelType, device_groups, gpu_scope, scope_kernel_types
from dyno.trace_analysis.analyses.intervals import intersection_length, union_length
from dyno.trace_analysis.model import Trace

__all__ = ["CommCompOverlap", "DeviceOverlap", "comm_comp_overlap"]


class DeviceOverlap(msgspec.Struct, frozen=True):
    device: int
    communication_us: float
    computation_us: float
    overlap_us: float


class CommCompOverlap(msgspec.Struct, frozen=True):
    rank: int
    communication_us: float  # union of NCCL kernels (mean over the devices)
    computation_us: float  # union of computation kernels (mean over the devices)
    overlap_us: float  # time both run on the same device (mean over the devices)
    n_comm_kernels: int
    devices: tuple[DeviceOverlap, ...] = ()

    @property
    def has_communication(self) -> bool:
        return self.communication_us > 0

    @property
    def overlap_share(self) -> float | None:
        """Share of communication time overlapped by computation (0..1); None without communication."""
        return self.overlap_us / self.communication_us if self.communication_us > 0 else None

    @property
    def exposed_communication_us(self) -> float:
        return self.communication_us - self.overlap_us


def comm_comp_overlap(
    trace: Trace, *, include_last_step: bool = False, hta_ns_rounding: bool = False
) -> CommCompOverlap:
    """Overlap of communication by computation (see the module docstring). Cached on the trace."""
    key = ("comm_comp_overlap", include_last_step, hta_ns_rounding)
    return trace.cached(key, lambda: _comm_comp_overlap(trace, include_last_step, hta_ns_rounding))


def _comm_comp_overlap(trace: Trace, include_last_step: bool, hta_ns_rounding: bool) -> CommCompOverlap:
    scope = gpu_scope(trace, include_last_step, hta_ns_rounding)
    kt = scope_kernel_types(trace, include_last_step, hta_ns_rounding)
    comp = kt == KernelType.COMPUTATION.value
    comm = kt == KernelType.COMMUNICATION.value
    devices = []
    groups = device_groups(scope.device) if len(scope.devices) > 1 else [(d, None) for d in scope.devices]
    for d, sel in groups:
        ts, end, d_comm, d_comp = scope.ts, scope.end, comm, comp
        if sel is not None:
            ts, end, d_comm, d_comp = ts[sel], end[sel], comm[sel], comp[sel]
        devices.append(_overlap_of(d, ts, end, d_comm, d_comp))
    k = max(len(devices), 1)
    return CommCompOverlap(
        rank=trace.rank,
        communication_us=sum(o.communication_us for o in devices) / k,
        computation_us=sum(o.computation_us for o in devices) / k,
        overlap_us=sum(o.overlap_us for o in devices) / k,
        n_comm_kernels=int(comm.sum()),
        devices=tuple(devices),
    )


def _overlap_of(device: int, ts: np.ndarray, end: np.ndarray, comm: np.ndarray, comp: np.ndarray) -> DeviceOverlap:
    comm_us = union_length(ts[comm], end[comm])
    return DeviceOverlap(
        device,
        comm_us,
        union_length(ts[comp], end[comp]),
        intersection_length(ts[comp], end[comp], ts[comm], end[comm]) if comm_us > 0 else 0.0,
    )

"""Communication–computation overlap (HTA's ``get_comm_comp_overlap``).

overlap = |union(COMPUTATION kernels) ∩ union(NCCL kernels)| / |union(NCCL kernels)|. HTA reports NaN when there
is no communication; dyno reports ``None`` (and ``has_communication`` False). Exposed communication =
communication time not hidden by compute.
"""

from __future__ import annotations

from dataclasses import dataclass

from dyno.trace_analysis.analyses.gpu import KernelType, gpu_scope, scope_kernel_types
from dyno.trace_analysis.analyses.intervals import intersection_length, union_length
from dyno.trace_analysis.model import Trace

__all__ = ["CommCompOverlap", "comm_comp_overlap"]


@dataclass(frozen=True)
class CommCompOverlap:
    rank: int
    communication_us: float  # union of NCCL kernels
    computation_us: float  # union of computation kernels
    overlap_us: float  # time both run
    n_comm_kernels: int

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
    ts, end = scope.ts, scope.end
    comm_us = union_length(ts[comm], end[comm])
    return CommCompOverlap(
        rank=trace.rank,
        communication_us=comm_us,
        computation_us=union_length(ts[comp], end[comp]),
        overlap_us=intersection_length(ts[comp], end[comp], ts[comm], end[comm]) if comm_us > 0 else 0.0,
        n_comm_kernels=int(comm.sum()),
    )

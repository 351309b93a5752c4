"""Temporal breakdown: how the GPU's time splits into idle, compute, non-compute and communication.

Definitions (HTA's ``get_temporal_breakdown``): span = first GPU activity start to last GPU activity end;
idle = span - union of GPU rows; compute = union of COMPUTATION kernels; non-compute = busy - compute;
communication = union of NCCL kernels (part of non-compute). By default ``cuda_sync`` rows count as busy (as in
HTA) so figures match HTA; ``sync_is_busy=False`` gives dyno's stricter figure (a sync row is the host waiting,
not GPU work). Times are µs; shares are fractions of the span (0..1).
"""

from __future__ import annotations

from dataclasses import dataclass

from dyno.trace_analysis.analyses.gpu import KernelType, gpu_scope, scope_kernel_types
from dyno.trace_analysis.analyses.intervals import union_length
from dyno.trace_analysis.model import Trace

__all__ = ["TemporalBreakdown", "temporal_breakdown"]


@dataclass(frozen=True)
class TemporalBreakdown:
    rank: int
    span_us: float
    busy_us: float
    idle_us: float
    compute_us: float
    non_compute_us: float
    communication_us: float
    memory_us: float
    n_gpu_events: int

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
    """Breakdown of one rank (all its GPUs pooled, as HTA does); see the module docstring. Cached on the trace."""
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
    return TemporalBreakdown(
        rank=trace.rank,
        span_us=span,
        busy_us=busy,
        idle_us=span - busy,
        compute_us=compute,
        non_compute_us=busy - compute,
        communication_us=typed(KernelType.COMMUNICATION.value),
        memory_us=typed(KernelType.MEMORY.value),
        n_gpu_events=n,
    )

"""Across ranks: step-time spread and straggler ranks.

Per rank: mean step time (``steps.step_timings``; the GPU span when a rank has no steps) and total time in
NCCL kernels. A straggler arrives late to collectives: its own step is slowest, while the others wait for it
inside their collectives, so its communication time is the shortest. A rank is flagged when its step time is
above median + ``mad_k`` × MAD (median absolute deviation) of all ranks, or when its communication time is
below median - ``mad_k`` × MAD (and the ranks' communication times differ by more than ``min_rel_spread``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from dyno.trace_analysis.analyses.gpu import KernelType, gpu_scope, kernel_types
from dyno.trace_analysis.analyses.steps import step_timings
from dyno.trace_analysis.analyses.temporal import temporal_breakdown
from dyno.trace_analysis.model import MultiRankTrace, Trace

__all__ = ["RankTiming", "RankSpread", "rank_spread"]


@dataclass(frozen=True)
class RankTiming:
    rank: int
    n_steps: int
    mean_step_us: float
    comm_us: float  # summed NCCL kernel time


@dataclass(frozen=True)
class RankSpread:
    ranks: tuple[RankTiming, ...]
    median_step_us: float
    mad_step_us: float
    median_comm_us: float
    mad_comm_us: float
    stragglers: tuple[int, ...]  # flagged ranks, worst first
    reasons: dict[int, str]

    @property
    def step_spread(self) -> float:
        """(max - min) / median of the ranks' mean step times."""
        v = np.array([r.mean_step_us for r in self.ranks])
        return float((v.max() - v.min()) / self.median_step_us) if len(v) and self.median_step_us > 0 else 0.0


def _mad(v: np.ndarray) -> tuple[float, float]:
    med = float(np.median(v))
    return med, float(np.median(np.abs(v - med)))


def _timing(t: Trace) -> RankTiming:
    st = step_timings(t)
    mean = st.mean_us if st.steps else temporal_breakdown(t).span_us
    scope = gpu_scope(t)
    comm = kernel_types(t, scope.activity) == KernelType.COMMUNICATION
    return RankTiming(t.rank, len(st.steps), mean, float(scope.activity.dur[comm].sum()))


def rank_spread(
    traces: MultiRankTrace | Iterable[Trace], *, mad_k: float = 2.0, min_rel_spread: float = 0.05
) -> RankSpread:
    timings = tuple(_timing(t) for t in traces)
    step = np.array([r.mean_step_us for r in timings])
    comm = np.array([r.comm_us for r in timings])
    med_s, mad_s = _mad(step) if len(step) else (0.0, 0.0)
    med_c, mad_c = _mad(comm) if len(comm) else (0.0, 0.0)
    reasons: dict[int, str] = {}
    if len(timings) >= 2:
        # a floor on MAD so that near-identical ranks (MAD ~ 0) do not flag noise
        floor_s = max(mad_s, min_rel_spread * med_s)
        floor_c = max(mad_c, min_rel_spread * med_c)
        for r in timings:
            if med_s > 0 and r.mean_step_us > med_s + mad_k * floor_s:
                reasons[r.rank] = f"step time {r.mean_step_us / 1e3:.1f} ms vs median {med_s / 1e3:.1f} ms"
            elif med_c > 0 and r.comm_us < med_c - mad_k * floor_c:
                reasons[r.rank] = (
                    f"least time in collectives ({r.comm_us / 1e3:.1f} ms vs median {med_c / 1e3:.1f} ms): "
                    "the others wait for it"
                )
    by_rank = {r.rank: r for r in timings}
    stragglers = tuple(sorted(reasons, key=lambda k: -by_rank[k].mean_step_us))
    return RankSpread(timings, med_s, mad_s, med_c, mad_c, stragglers, reasons)

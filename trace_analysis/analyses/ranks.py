"""Across ranks: step-time spread and straggler ranks.

Per rank: mean step time (``steps.step_timings``; the GPU span when a rank has no steps) and total time in
collectives: NCCL kernels on GPU traces; on CPU-only traces (gloo, or GPU ranks traced without CUDA activities)
the host-side collective ranges (``gloo:all_reduce``, ``nccl:*``, ...). A straggler arrives late to
collectives: its own step is slowest, while the others wait for it inside their collectives, so its
communication time is the shortest. In synchronous data parallelism the collectives equalise step times, so
the wait is often the only trace of a straggler. A rank is flagged when

- its step time is above median + ``mad_k`` × MAD (median absolute deviation) of all ranks, or
- its communication time is below median - ``mad_k`` × MAD (with a floor of ``min_rel_spread`` × median on the
  MAD), or
- it is the rank with the least communication time and the other ranks' median exceeds it by more than
  ``min_rel_spread`` of the traced window: the time the others spend waiting for it. This criterion is what
  works for two ranks, where median ± k×MAD can never single one out.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec
import numpy as np

from dyno.trace_analysis.analyses.arrays import median
from dyno.trace_analysis.analyses.gpu import KernelType, gpu_scope, scope_kernel_types
from dyno.trace_analysis.analyses.steps import step_timings
from dyno.trace_analysis.analyses.temporal import temporal_breakdown
from dyno.trace_analysis.model import Cat, MultiRankTrace, Trace

__all__ = ["RankTiming", "RankSpread", "rank_spread", "rank_timing", "spread_of"]


class RankTiming(msgspec.Struct, frozen=True):
    rank: int
    n_steps: int
    mean_step_us: float
    comm_us: float  # summed NCCL kernel time, else host-side collective time (CPU-only traces)
    window_us: float = 0.0  # the time the figures cover: steps x mean step, else the span


class RankSpread(msgspec.Struct, frozen=True):
    ranks: tuple[RankTiming, ...]
    median_step_us: float
    mad_step_us: float
    median_comm_us: float
    mad_comm_us: float
    stragglers: tuple[int, ...]  # flagged ranks, worst first
    reasons: dict[int, str]
    # per straggler, over the traced window: its step time beyond the median x its steps, or the time the others
    # wait for it in collectives
    lost_us: dict[int, float] = msgspec.field(default_factory=dict)
    # per straggler, the window its lost time is a share of: its own (step time) or the waiting ranks' (collective
    # wait: the others lose that time in their windows, and a rank that joined the trace late has a short one)
    lost_window_us: dict[int, float] = msgspec.field(default_factory=dict)

    @property
    def step_spread(self) -> float:
        """(max - min) / median of the ranks' mean step times."""
        v = np.array([r.mean_step_us for r in self.ranks])
        return float((v.max() - v.min()) / self.median_step_us) if len(v) and self.median_step_us > 0 else 0.0


def _mad(v: np.ndarray) -> tuple[float, float]:
    med = median(v)
    return med, median(np.abs(v - med))


_HOST_COLLECTIVE_PREFIXES = ("gloo:", "nccl:", "mpi:", "ucc:", "c10d::wait")


def _host_collective_us(t: Trace) -> float:
    ev = t.events_of(Cat.USER_ANNOTATION, Cat.CPU_OP)
    if not len(ev):
        return 0.0
    return float(
        ev.dur[t.name_mask(ev, lambda n: n.startswith(_HOST_COLLECTIVE_PREFIXES), _HOST_COLLECTIVE_PREFIXES)].sum()
    )


def _span_us(t: Trace) -> float:
    ev = t.events
    if not len(ev):
        return 0.0
    return float(ev.end.max() - ev.ts.min())


def rank_timing(t: Trace) -> RankTiming:
    """One rank's figures (cached on its trace: they do not depend on the spread thresholds)."""
    return t.cached("rank_timing", lambda: _rank_timing(t))


def _rank_timing(t: Trace) -> RankTiming:
    st = step_timings(t)
    tb = temporal_breakdown(t)
    mean = st.mean_us if st.steps else (tb.span_us if tb.has_gpu else _span_us(t))
    scope = gpu_scope(t)
    comm_mask = scope_kernel_types(t)[scope.is_activity] == KernelType.COMMUNICATION.value
    comm = float(scope.activity.dur[comm_mask].sum()) if comm_mask.any() else _host_collective_us(t)
    window = mean * len(st.steps) if st.steps else mean
    if not tb.has_gpu:  # host-side collectives run outside the step markers too: cover the whole trace
        window = max(window, _span_us(t))
    return RankTiming(t.rank, len(st.steps), mean, comm, window)


def rank_spread(
    traces: MultiRankTrace | Iterable[Trace], *, mad_k: float = 2.0, min_rel_spread: float = 0.05
) -> RankSpread:
    return spread_of([rank_timing(t) for t in traces], mad_k=mad_k, min_rel_spread=min_rel_spread)


def spread_of(timings: Iterable[RankTiming], *, mad_k: float = 2.0, min_rel_spread: float = 0.05) -> RankSpread:
    """The spread over the ranks' figures (``rank_timing`` of each): all a cross-rank comparison needs of a rank,
    so that a job's ranks are compared without holding their traces."""
    timings = tuple(timings)
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
    # over every step (the window), as the collective wait below and every rule's time lost: one step's excess
    # against the whole window understated the share and sorted the finding below smaller per-rank costs
    lost: dict[int, float] = {
        r: max(by_rank[r].mean_step_us - med_s, 0.0) * max(by_rank[r].n_steps, 1) for r in reasons
    }
    lost_window = {r: by_rank[r].window_us for r in reasons}
    if len(timings) >= 2 and med_c > 0:
        least = min(timings, key=lambda r: r.comm_us)
        others = np.array([r.comm_us for r in timings if r is not least])
        excess = median(others) - least.comm_us
        # the others' windows, where they wait: with the straggler's in the median, a rank whose trace covers
        # less time (it started its cycle late: the cause of the wait) gave shares of the window above 100%
        window = median([r.window_us for r in timings if r is not least])
        if window > 0 and excess > min_rel_spread * window:
            if excess > lost.get(least.rank, 0.0):
                lost[least.rank], lost_window[least.rank] = excess, window
            reasons.setdefault(
                least.rank,
                f"the other ranks wait for it in collectives: {median(others) / 1e3:.1f} ms each vs "
                f"{least.comm_us / 1e3:.1f} ms on this rank ({excess / window:.0%} of their traced window)",
            )
    stragglers = tuple(sorted(reasons, key=lambda k: (-lost.get(k, 0.0), -by_rank[k].mean_step_us)))
    return RankSpread(timings, med_s, mad_s, med_c, mad_c, stragglers, reasons, lost, lost_window)

"""Kernel breakdown by type (COMMUNICATION / MEMORY / COMPUTATION / OTHER) and the top kernels by GPU time.

Over the analysis window's GPU work (kernels, memcpy, memset; see ``gpu.GpuScope``). Times are summed durations
(not unions): the share says where GPU work goes, not how busy the GPU was (that is ``temporal``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dyno.trace_analysis.analyses.gpu import KernelType, gpu_scope, kernel_types
from dyno.trace_analysis.model import Trace

__all__ = ["KernelTypeTime", "KernelStat", "KernelBreakdown", "kernel_breakdown", "group_by_name"]


@dataclass(frozen=True)
class KernelTypeTime:
    kernel_type: str
    count: int
    total_us: float
    share: float  # of all GPU work time


@dataclass(frozen=True)
class KernelStat:
    name: str
    kernel_type: str
    count: int
    total_us: float
    mean_us: float
    min_us: float
    max_us: float
    share: float
    example_ts: float  # start of the longest instance (find it in Perfetto)


@dataclass(frozen=True)
class KernelBreakdown:
    rank: int
    total_us: float
    by_type: tuple[KernelTypeTime, ...]
    top: tuple[KernelStat, ...]
    n_kernels: int
    n_distinct: int


def group_by_name(
    names: np.ndarray, dur: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct name id: (ids, count, total, min, max, row of the longest), vectorized."""
    ids, inv = np.unique(names, return_inverse=True)
    count = np.bincount(inv, minlength=len(ids))
    total = np.bincount(inv, weights=dur, minlength=len(ids))
    order = np.lexsort((dur, inv))  # by group, then duration ascending
    first = np.searchsorted(inv[order], np.arange(len(ids)), side="left")
    last = np.searchsorted(inv[order], np.arange(len(ids)), side="right") - 1
    mins = dur[order][first]
    maxs = dur[order][last]
    return ids, count, total, mins, maxs, order[last]


def kernel_breakdown(trace: Trace, *, top_n: int = 20, include_last_step: bool = False) -> KernelBreakdown:
    scope = gpu_scope(trace, include_last_step)
    act = scope.activity
    dur = act.dur
    total = float(dur.sum())
    kt = kernel_types(trace, act)
    by_type = []
    for k in KernelType:
        m = kt == k
        t = float(dur[m].sum())
        by_type.append(KernelTypeTime(k.name, int(m.sum()), t, t / total if total > 0 else 0.0))
    top: list[KernelStat] = []
    n_distinct = 0
    if len(act):
        ids, count, tot, mins, maxs, longest = group_by_name(act.name, dur)
        n_distinct = len(ids)
        best = np.argsort(-tot, kind="stable")[:top_n]
        for j in best:
            top.append(
                KernelStat(
                    name=trace.strings[ids[j]],
                    kernel_type=KernelType(int(kt[longest[j]])).name,
                    count=int(count[j]),
                    total_us=float(tot[j]),
                    mean_us=float(tot[j] / count[j]),
                    min_us=float(mins[j]),
                    max_us=float(maxs[j]),
                    share=float(tot[j] / total) if total > 0 else 0.0,
                    example_ts=float(act.ts[longest[j]]),
                )
            )
    return KernelBreakdown(trace.rank, total, tuple(by_type), tuple(top), len(act), n_distinct)

"""Kernel breakdown by type (COMMUNICATION / MEMORY / COMPUTATION / OTHER) and the top kernels by GPU time.

Over the analysis window's GPU work (kernels, memcpy, memset; see ``gpu.GpuScope``). Times are summed durations
(not unions): the share says where GPU work goes, not how busy the GPU was (that is ``temporal``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dyno.trace_analysis.analyses.gpu import KernelType, gpu_scope, kernel_types
from dyno.trace_analysis.model import Trace

__all__ = ["KernelTypeTime", "KernelStat", "KernelBreakdown", "kernel_breakdown", "group_by_name", "group_rows_by_name"]


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
    ids, _, count, total, mins, maxs, longest = group_rows_by_name(names, dur)
    return ids, count, total, mins, maxs, longest


def group_rows_by_name(
    names: np.ndarray, dur: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``group_by_name`` plus the group of each row: (ids, group per row, count, total, min, max, longest row)."""
    if len(names) and names.min() >= 0:
        # name ids are small non-negative ints: np.unique(..., return_inverse=True) without a sort
        present = np.bincount(names)
        ids = np.flatnonzero(present).astype(names.dtype, copy=False)
        remap = np.zeros(present.shape[0], dtype=np.intp)
        remap[ids] = np.arange(ids.shape[0])
        inv = remap[names]
    else:
        ids, inv = np.unique(names, return_inverse=True)
    count = np.bincount(inv, minlength=len(ids))
    total = np.bincount(inv, weights=dur, minlength=len(ids))
    # by group, then duration ascending, ties by row: np.lexsort((dur, inv)) as two stable sorts, the second by
    # group as int16 when it fits (numpy sorts those by radix)
    order = np.argsort(dur, kind="stable")
    groups = inv.astype(np.int16) if len(ids) <= np.iinfo(np.int16).max else inv
    order = order[np.argsort(groups[order], kind="stable")]
    # every group is non-empty, so in inv[order] group k spans [ends[k] - count[k], ends[k])
    ends = np.cumsum(count)
    first = ends - count
    last = ends - 1
    mins = dur[order][first]
    maxs = dur[order][last]
    return ids, inv, count, total, mins, maxs, order[last]


def kernel_breakdown(trace: Trace, *, top_n: int = 20, include_last_step: bool = False) -> KernelBreakdown:
    """Time by kernel type and the ``top_n`` kernels by total time. The grouping is cached on the trace (the
    report and the benchmark ask for different ``top_n``)."""
    g = trace.cached(("kernel_groups", include_last_step), lambda: _KernelGroups.of(trace, include_last_step))
    top = []
    for j in g.order[:top_n].tolist():
        got = g.built.get(j)  # one KernelStat per group, shared by every top_n
        if got is None:
            got = g.built[j] = KernelStat(
                name=trace.strings[g.ids[j]],
                kernel_type=KernelType(int(g.kt[j])).name,
                count=int(g.count[j]),
                total_us=float(g.tot[j]),
                mean_us=float(g.tot[j] / g.count[j]),
                min_us=float(g.mins[j]),
                max_us=float(g.maxs[j]),
                share=float(g.tot[j] / g.total) if g.total > 0 else 0.0,
                example_ts=float(g.example_ts[j]),
            )
        top.append(got)
    return KernelBreakdown(trace.rank, g.total, g.by_type, tuple(top), g.n_kernels, len(g.ids))


@dataclass(frozen=True, eq=False)
class _KernelGroups:
    """Per distinct kernel name over the window's GPU work: what ``kernel_breakdown`` reads for any ``top_n``."""

    total: float
    by_type: tuple[KernelTypeTime, ...]
    n_kernels: int
    ids: np.ndarray
    count: np.ndarray
    tot: np.ndarray
    mins: np.ndarray
    maxs: np.ndarray
    kt: np.ndarray  # per group: kernel type (of its longest row; one name has one type)
    example_ts: np.ndarray  # per group: start of the longest row
    order: np.ndarray  # groups by total time, descending (stable)
    built: dict[int, KernelStat] = field(default_factory=dict)

    @classmethod
    def of(cls, trace: Trace, include_last_step: bool) -> _KernelGroups:
        act = gpu_scope(trace, include_last_step).activity
        dur = act.dur
        total = float(dur.sum())
        kt = kernel_types(trace, act)
        by_type = []
        for k in KernelType:
            m = kt == k
            t = float(dur[m].sum())
            by_type.append(KernelTypeTime(k.name, int(m.sum()), t, t / total if total > 0 else 0.0))
        if len(act):
            ids, count, tot, mins, maxs, longest = group_by_name(act.name, dur)
        else:
            ids = longest = count = np.empty(0, np.int64)
            tot = mins = maxs = np.empty(0, np.float64)
        order = np.argsort(-tot, kind="stable")
        return cls(total, tuple(by_type), len(act), ids, count, tot, mins, maxs, kt[longest], act.ts[longest], order)

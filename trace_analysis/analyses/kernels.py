"""Kernel breakdown by type (COMMUNICATION / MEMORY / COMPUTATION / OTHER) and the top kernels by GPU time.

Over the analysis window's GPU work (kernels, memcpy, memset; see ``gpu.GpuScope``). Times are summed durations
(not unions): the share says where GPU work goes, not how busy the GPU was (that is ``temporal``).
"""

from __future__ import annotations

import msgspec
import numpy as np

from dyno.trace_analysis.analyses.arrays import INT16_MAX, unique_inverse
from dyno.trace_analysis.analyses.gpu import KernelType, gpu_scope, scope_kernel_types
from dyno.trace_analysis.model import Trace

__all__ = ["KernelTypeTime", "KernelStat", "KernelBreakdown", "kernel_breakdown", "group_by_name", "group_rows_by_name"]


class KernelTypeTime(msgspec.Struct, frozen=True):
    kernel_type: str
    count: int
    total_us: float
    share: float  # of all GPU work time


class KernelStat(msgspec.Struct, frozen=True):
    name: str
    kernel_type: str
    count: int
    total_us: float
    mean_us: float
    min_us: float
    max_us: float
    share: float
    example_ts: float  # start of the longest instance (find it in Perfetto)


class KernelBreakdown(msgspec.Struct, frozen=True):
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
    ids, inv = unique_inverse(names)  # name ids are small non-negative ints: no sort
    count = np.bincount(inv, minlength=len(ids))
    total = np.bincount(inv, weights=dur, minlength=len(ids))
    # by group, then duration ascending, ties by row: np.lexsort((dur, inv)) as two stable sorts, the second by
    # group as int16 when it fits (numpy sorts those by radix)
    order = dur.argsort(kind="stable")
    groups = inv.astype(np.int16) if len(ids) <= INT16_MAX else inv
    order = order[groups[order].argsort(kind="stable")]
    # every group is non-empty, so in inv[order] group k spans [ends[k] - count[k], ends[k])
    ends = count.cumsum()
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
    for j in g.order[:top_n]:
        got = g.built.get(j)  # one KernelStat per group, shared by every top_n
        if got is None:
            tot, count = g.tot[j], g.count[j]
            got = g.built[j] = KernelStat(
                name=trace.strings[g.ids[j]],
                kernel_type=_TYPE_NAMES[g.kt[j]],
                count=count,
                total_us=tot,
                mean_us=tot / count,  # Python floats: the same IEEE division as numpy's
                min_us=g.mins[j],
                max_us=g.maxs[j],
                share=tot / g.total if g.total > 0 else 0.0,
                example_ts=g.example_ts[j],
            )
        top.append(got)
    return KernelBreakdown(trace.rank, g.total, g.by_type, tuple(top), g.n_kernels, len(g.ids))


_TYPE_NAMES = tuple(k.name for k in sorted(KernelType))  # by value (0..3)


class _KernelGroups(msgspec.Struct, frozen=True, eq=False):
    """Per distinct kernel name over the window's GPU work: what ``kernel_breakdown`` reads for any ``top_n``.
    Python lists (``tolist()``): the KernelStats are built from Python numbers."""

    total: float
    by_type: tuple[KernelTypeTime, ...]
    n_kernels: int
    ids: list[int]
    count: list[int]
    tot: list[float]
    mins: list[float]
    maxs: list[float]
    kt: list[int]  # per group: kernel type (of its longest row; one name has one type)
    example_ts: list[float]  # per group: start of the longest row
    order: list[int]  # groups by total time, descending (stable)
    built: dict[int, KernelStat] = msgspec.field(default_factory=dict)

    @classmethod
    def of(cls, trace: Trace, include_last_step: bool) -> _KernelGroups:
        scope = gpu_scope(trace, include_last_step)
        act = scope.activity
        dur = act.dur
        total = float(dur.sum())
        kt = scope_kernel_types(trace, include_last_step)[scope.is_activity]
        by_type = []
        counts = np.bincount(kt, minlength=len(KernelType)).tolist() if len(kt) else [0] * len(KernelType)
        for k in KernelType:
            t = float(dur[kt == k.value].sum()) if counts[k.value] else 0.0  # an absent type sums to 0.0
            by_type.append(KernelTypeTime(k.name, counts[k.value], t, t / total if total > 0 else 0.0))
        if len(act):
            ids, count, tot, mins, maxs, longest = group_by_name(act.name, dur)
        else:
            ids = longest = count = np.empty(0, np.int64)
            tot = mins = maxs = np.empty(0, np.float64)
        order = (-tot).argsort(kind="stable")
        return cls(
            total,
            tuple(by_type),
            len(act),
            ids.tolist(),
            count.tolist(),
            tot.tolist(),
            mins.tolist(),
            maxs.tolist(),
            kt[longest].tolist(),
            act.ts[longest].tolist(),
            order.tolist(),
        )

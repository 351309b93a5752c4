"""Vectorized interval arithmetic over (start, end) arrays: unions, lengths, intersections, coverage.

Merging follows HTA's ``merge_kernel_intervals``: sorted by start, an interval joins the current group unless it
starts strictly after the running maximum end (touching intervals merge).
"""

from __future__ import annotations

import numpy as np

from dyno.trace_analysis.analyses.arrays import flatnonzero

__all__ = ["clip", "merge", "union_length", "intersection_length", "coverage_before", "coverage_within", "gaps"]


def clip(start: np.ndarray, end: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Intervals cut to [lo, hi]; one outside it becomes empty (start == end), one reversed stays empty."""
    s = np.minimum(np.maximum(start, lo), hi)  # np.clip as its two ufuncs (cheaper on small arrays)
    return s, np.maximum(np.minimum(end, hi), s)


def merge(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as sorted, disjoint (starts, ends)."""
    n = len(start)
    if n == 0:
        return np.empty(0, np.float64), np.empty(0, np.float64)
    st = np.asarray(start)
    s = np.asarray(start, dtype=np.float64)
    e = np.asarray(end, dtype=np.float64)
    if n > 1 and not (st[1:] >= st[:-1]).all():  # rows usually come sorted by start: the stable sort is the identity
        order = st.argsort(kind="stable")
        s, e = s[order], e[order]
    running = np.maximum.accumulate(e)
    new = np.empty(n, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > running[:-1]
    first = flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def union_length(start: np.ndarray, end: np.ndarray) -> float:
    s, e = merge(start, end)
    return float((e - s).sum())


def coverage_before(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For disjoint sorted intervals: measure of their union within (-inf, t], for each t."""
    if len(starts) == 0:
        return np.zeros(len(t), dtype=np.float64)
    cum = np.concatenate(([0.0], (ends - starts).cumsum()))
    k = starts.searchsorted(t, side="right")  # intervals starting at or before t
    kk = np.maximum(k - 1, 0)
    # np.clip(t - start, 0, length) as its two ufuncs (np.clip's Python wrapper and first call cost more than
    # the work here; the operands are >= 0 or NaN, where both give the same values)
    partial = np.where(k > 0, np.minimum(np.maximum(t - starts[kk], 0.0), ends[kk] - starts[kk]), 0.0)
    return cum[kk] + partial


def coverage_within(starts: np.ndarray, ends: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For disjoint sorted intervals: measure of their union inside each [lo_i, hi_i] (hi_i >= lo_i), with one
    ``coverage_before`` pass over both ends."""
    k = lo.shape[0]
    cov = coverage_before(starts, ends, np.concatenate((hi, lo)))
    return cov[:k] - cov[k:]


def intersection_length(a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray) -> float:
    """Measure of union(A) ∩ union(B)."""
    a_s, a_e = merge(a_start, a_end)
    b_s, b_e = merge(b_start, b_end)
    if not len(a_s) or not len(b_s):
        return 0.0
    return float((coverage_before(b_s, b_e, a_e) - coverage_before(b_s, b_e, a_s)).sum())


def gaps(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gaps between consecutive disjoint sorted intervals: (gap_start, gap_length)."""
    if len(starts) < 2:
        return np.empty(0, np.float64), np.empty(0, np.float64)
    return ends[:-1], starts[1:] - ends[:-1]

"""Vectorized interval arithmetic on (start, end) arrays in µs."""

from __future__ import annotations

import numpy as np

__all__ = ["busy_between", "clip_total", "intersect_total", "merge", "total"]


def merge(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as sorted, disjoint (start, end) arrays."""
    if start.shape[0] == 0:
        return start.astype(np.float64), end.astype(np.float64)
    order = np.argsort(start, kind="stable")
    s, e = start[order].astype(np.float64), end[order].astype(np.float64)
    run_end = np.maximum.accumulate(e)
    # a new merged interval starts where the start lies beyond every end seen so far
    new = np.empty(s.shape[0], bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    starts = s[new]
    idx = np.flatnonzero(new)
    ends = run_end[np.r_[idx[1:] - 1, s.shape[0] - 1]]
    return starts, ends


def total(start: np.ndarray, end: np.ndarray) -> float:
    s, e = merge(start, end)
    return float((e - s).sum())


def intersect_total(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Length of union(a) ∩ union(b)."""
    a_s, a_e = merge(*a)
    b_s, b_e = merge(*b)
    if a_s.shape[0] == 0 or b_s.shape[0] == 0:
        return 0.0
    # |A ∩ B| = |A| + |B| - |A ∪ B|
    u = total(np.r_[a_s, b_s], np.r_[a_e, b_e])
    return float((a_e - a_s).sum() + (b_e - b_s).sum() - u)


def clip_total(start: np.ndarray, end: np.ndarray, lo: float, hi: float) -> float:
    """Length of the union of intervals clipped to [lo, hi]."""
    return total(np.clip(start, lo, hi), np.clip(end, lo, hi))


def busy_between(starts: np.ndarray, ends: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Busy time of the union of intervals inside each [edges[i], edges[i+1]) bin (len(edges) - 1 values)."""
    s, e = merge(starts, ends)
    if s.shape[0] == 0:
        return np.zeros(max(edges.shape[0] - 1, 0))
    cum = np.r_[0.0, np.cumsum(e - s)]

    def busy_before(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(s, t, side="right") - 1
        inside = np.clip(t - s[np.maximum(k, 0)], 0.0, (e - s)[np.maximum(k, 0)])
        return np.where(k >= 0, cum[np.maximum(k, 0)] + inside, 0.0)

    b = busy_before(edges.astype(np.float64))
    return np.diff(b)

"""Small numpy helpers for the analyses and rules: ``distinct`` and ``median`` without numpy's slow first call.

Why: in numpy 2.x a plain ``np.unique(a)`` (no ``return_*``) and ``np.median`` both import ``numpy.ma`` on their
first call (masked-array checks), which costs 6-10 ms once per process, more than all the analyses of a small
trace together. These helpers give the same values by sorting, never touching ``numpy.ma``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["INT16_MAX", "distinct", "flatnonzero", "linspace", "median", "member", "readonly", "unique_inverse"]

INT16_MAX = 32767  # np.iinfo(np.int16).max (np.iinfo builds a Python object on first use)


def distinct(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``a`` (as ``np.unique(a)`` for integer arrays; NaNs are not merged)."""
    s = np.asarray(a).flatten()  # np.sort(a.ravel()): a copy sorted in place, without np.sort's wrapper
    s.sort()
    if s.shape[0] < 2:
        return s
    keep = np.empty(s.shape[0], dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def readonly(*arrays: np.ndarray) -> None:
    """Mark arrays of a result cached on a trace read-only: every later caller gets the same arrays."""
    for a in arrays:
        a.setflags(write=False)


def median(a: np.ndarray | list[float]) -> float:
    """``float(np.median(a))``: the middle value, or the mean of the two middle ones; NaN if any value is NaN
    (or for no values)."""
    s = np.asarray(a, dtype=np.float64).flatten()
    s.sort()
    n = s.shape[0]
    if n == 0 or np.isnan(s[-1]):
        return float("nan")
    mid = n // 2
    if n % 2:
        return float(s[mid])
    return float((s[mid - 1] + s[mid]) / 2.0)


def unique_inverse(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(a, return_inverse=True)`` for an integer array (e.g. name ids). Non-negative values (the
    usual case: ids) are grouped with a bincount instead of a sort; same ids (dtype of ``a``) and inverse
    (intp)."""
    if len(a) and a.min() >= 0:
        present = np.bincount(a)
        ids = present.nonzero()[0].astype(a.dtype, copy=False)
        remap = np.zeros(present.shape[0], dtype=np.intp)
        remap[ids] = np.arange(ids.shape[0])
        return ids, remap[a]
    ids, inv = np.unique(a, return_inverse=True)
    return ids, inv


def linspace(lo: float, hi: float, num: int) -> np.ndarray:
    """``np.linspace(lo, hi, num)`` for float bounds and ``num >= 2``: the same arithmetic (arange times the
    step, plus lo, the last value set to hi) without np.linspace's Python-level argument handling."""
    div = num - 1
    delta = float(hi) - float(lo)
    step = delta / div
    y = np.arange(0, num, dtype=np.float64)
    if step == 0:  # denormal span: numpy divides first, then scales (gh-5437)
        y /= div
        y *= delta
    else:
        y *= step
    y += lo
    y[-1] = hi
    return y


def member(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``np.isin(a, b)`` for integer arrays, by bisection in sorted ``b`` (np.isin's first call in a process costs
    ~70 µs, more than a small trace's whole rule)."""
    if not len(b) or not len(a):
        return np.zeros(len(a), dtype=bool)
    s = np.sort(b)
    return s[np.minimum(s.searchsorted(a), len(s) - 1)] == a


def flatnonzero(a: np.ndarray) -> np.ndarray:
    """``np.flatnonzero(a)`` for a 1-D array: ``a.nonzero()[0]`` without the Python wrappers np.flatnonzero goes
    through (ravel and nonzero via fromnumeric: five Python calls each time, and rules make dozens)."""
    return a.nonzero()[0]

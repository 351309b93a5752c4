"""Small numpy helpers for the analyses and rules: ``distinct`` and ``median`` without numpy's slow first call.

Why: in numpy 2.x a plain ``np.unique(a)`` (no ``return_*``) and ``np.median`` both import ``numpy.ma`` on their
first call (masked-array checks), which costs 6-10 ms once per process, more than all the analyses of a small
trace together. These helpers give the same values by sorting, never touching ``numpy.ma``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["distinct", "median", "readonly"]


def distinct(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``a`` (as ``np.unique(a)`` for integer arrays; NaNs are not merged)."""
    s = np.sort(np.asarray(a).ravel())
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
    s = np.sort(np.asarray(a, dtype=np.float64).ravel())
    n = s.shape[0]
    if n == 0 or np.isnan(s[-1]):
        return float("nan")
    mid = n // 2
    if n % 2:
        return float(s[mid])
    return float((s[mid - 1] + s[mid]) / 2.0)

"""JSON values of one batch -> numpy column values: floats, integers (absent, unparsable or out-of-range -> -1)
and category codes. Every load path (native, typed, general) ends in these, so all give the same model.

Used by ``dyno.trace_analysis.builder``, ``native_columns`` and ``assembly``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dyno.trace_analysis.categories import CAT_BY_NAME, Cat

__all__ = ["ARG_INT_COLUMNS", "CAT_CODES", "cat_code", "float_column", "int_column", "nan_to_int"]

# (column, args key, dtype) of the integer columns taken from args
ARG_INT_COLUMNS = (
    ("stream", "stream", np.int64),
    ("correlation", "correlation", np.int64),
    ("external_id", "External id", np.int64),
    ("device", "device", np.int16),
    ("bytes", "bytes", np.int64),
    ("seq", "Sequence number", np.int64),
    ("in_nelems", "In msg nelems", np.int64),
    ("out_nelems", "Out msg nelems", np.int64),
    ("group_size", "Group size", np.int32),
)
# float64 bounds [lo, hi) of each integer dtype's values (both exact powers of two)
_INT_RANGE = {
    np.dtype(t): (float(np.iinfo(t).min), float(np.iinfo(t).max) + 1) for t in (np.int8, np.int16, np.int32, np.int64)
}
# cat value -> Cat code: CAT_BY_NAME's, plus the odd values seen (shared by all loads; see cat_code)
CAT_CODES: dict[Any, int] = {k: int(v) for k, v in CAT_BY_NAME.items()}


def cat_code(c: Any) -> int:
    """``Cat`` code of a JSON ``cat`` value (unknown, missing or unhashable -> ``Cat.OTHER``)."""
    try:
        code = CAT_CODES.get(c)
    except TypeError:  # unhashable (a list as category)
        return int(Cat.OTHER)
    if code is None:
        code = int(CAT_BY_NAME.get(str(c).lower(), Cat.OTHER)) if c is not None else int(Cat.OTHER)
        if len(CAT_CODES) < 4096:  # shared by all loads: bounded against files with endless odd categories
            CAT_CODES[c] = code
    return code


def int_column(values: list[Any], dtype: Any) -> np.ndarray:
    """Integer column from JSON values (None / missing -> -1; numeric strings accepted)."""
    try:
        arr = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        arr = np.array([_to_float(v) for v in values], dtype=np.float64)
    return nan_to_int(arr, dtype)


def nan_to_int(arr: np.ndarray, dtype: Any) -> np.ndarray:
    """Integer column from float64 values (NaN = absent -> -1); ``arr`` is modified. Integers go through float64
    on every path, so all paths round huge values the same way. Values the dtype cannot hold (a correlation id
    of 1e20) are absent too: cast, they would become arbitrary numbers (and a numpy warning)."""
    arr[np.isnan(arr)] = -1
    lo, hi = _INT_RANGE[np.dtype(dtype)]
    if arr.shape[0] and not (arr.min() >= lo and arr.max() < hi):
        arr[(arr < lo) | (arr >= hi)] = -1
    return arr.astype(dtype)


def _to_float(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def float_column(values: list[Any]) -> np.ndarray:
    """Float column from JSON values (missing or not a number -> NaN; numeric strings accepted)."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([_to_float(v) for v in values], dtype=np.float64)

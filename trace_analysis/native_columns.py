"""The native decoder's column buffers (``_native.c``) as the chunk columns ``TraceBuilder`` stores, strings
interned in the order the other load paths intern them (the same ids whichever path loaded a trace)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dyno.trace_analysis.columns import ARG_INT_COLUMNS, nan_to_int
from dyno.trace_analysis.interning import Interner

__all__ = ["complete_columns", "flow_columns"]


def complete_columns(c: dict[str, Any], cats: np.ndarray, interner: Interner) -> dict[str, np.ndarray | None]:
    """The complete events' columns of native batch ``c`` (``cats``: their category codes); None: a column no event
    of the batch has."""
    cols: dict[str, np.ndarray | None] = {
        "ts": np.frombuffer(c["x_ts"], dtype=np.float64),
        "dur": np.frombuffer(c["x_dur"], dtype=np.float64),
        "cat": cats,
        "name": interner.native_ids(c["x_name"], c["x_name_u"]),
        "pid": interner.native_proc_ids(c, "x_pid"),
        "tid": interner.native_proc_ids(c, "x_tid"),
    }
    for col, _, dtype in ARG_INT_COLUMNS:
        present = c[f"x_{col}_n"]
        arr = np.frombuffer(c[f"x_{col}"], dtype=np.float64)
        cols[col] = nan_to_int(arr, dtype) if present else None
    for col in ("input_dims", "input_types"):
        cols[col] = interner.native_json_ids(c[f"x_{col}"], c[f"x_{col}_u"]) if c[f"x_{col}_u"] else None
    for col in ("coll_name", "dtype"):
        cols[col] = interner.native_ids(c[f"x_{col}"], c[f"x_{col}_u"]) if c[f"x_{col}_u"] else None
    return cols


def flow_columns(c: dict[str, Any], interner: Interner) -> dict[str, np.ndarray]:
    """The flow events' columns of native batch ``c``."""
    return {
        "id": nan_to_int(np.frombuffer(c["f_id"], dtype=np.float64), np.int64),
        "ts": np.frombuffer(c["f_ts"], dtype=np.float64),
        "pid": interner.native_proc_ids(c, "f_pid"),
        "tid": interner.native_proc_ids(c, "f_tid"),
        "phase": np.frombuffer(c["f_phase"], dtype=np.int8),
        "cat": interner.native_ids(c["f_cat"], c["f_cat_u"]),
    }

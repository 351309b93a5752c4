"""Column chunks: each batch's columns kept as numpy chunks (mostly-absent integer columns sparse), then assembled
into the sorted tables of the model one column at a time, so that peak memory is the model plus two columns.

Used by ``dyno.trace_analysis.builder`` (``TraceBuilder.build``).
"""

from __future__ import annotations

import ctypes
import logging
import sys
from typing import Any

import numpy as np

from dyno.trace_analysis.columns import float_column, int_column
from dyno.trace_analysis.events import EVENT_DTYPES, Events
from dyno.trace_analysis.interning import Interner
from dyno.trace_analysis.tables import Flows, Instants, MemoryEvents

__all__ = [
    "assemble_events",
    "assemble_flows",
    "instants_table",
    "memory_table",
    "release_free_memory",
    "sparsify",
]

logger = logging.getLogger(__name__)

# integer columns that may be stored sparse (see Events)
_SPARSE_CANDIDATES = frozenset(
    {"stream", "correlation", "external_id", "device", "bytes", "seq", "input_dims", "input_types", "coll_name"}
    | {"in_nelems", "out_nelems", "group_size", "dtype"}
)


def _load_malloc_trim() -> Any:
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return None


_MALLOC_TRIM = _load_malloc_trim() if sys.platform.startswith("linux") else None


def release_free_memory() -> None:
    """Return freed heap pages to the OS (glibc keeps the holes left by many small arrays and Python objects
    resident; without this the peak RSS of a load is about twice the model)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


_NO_ROWS = np.empty(0, dtype=np.int64)
# Below this many rows, assembly does not hand freed memory back after each column (malloc_trim costs ~0.1 ms a
# call; it matters for the peak RSS of traces of millions of events, not for small ones)
_TRIM_EACH_COLUMN_ROWS = 1 << 20


class _SparseChunk:
    """A mostly-absent column of one batch: local row numbers and their values."""

    __slots__ = ("rows", "values")

    def __init__(self, rows: np.ndarray, values: np.ndarray) -> None:
        self.rows = rows
        self.values = values


def _sparse_pays(nnz: int, n: int, itemsize: int) -> bool:
    """Store (rows, values) instead of a dense column when that takes < 3/4 of the dense bytes."""
    return nnz * (8 + itemsize) < 0.75 * n * itemsize


def sparsify(chunk: dict[str, Any]) -> None:
    """Store one batch's mostly-absent integer columns as ``_SparseChunk`` (None: no event of the batch has it)."""
    n = len(chunk["ts"])
    for k in _SPARSE_CANDIDATES:
        arr = chunk[k]
        if arr is None:
            chunk[k] = _SparseChunk(_NO_ROWS, np.empty(0, dtype=EVENT_DTYPES[k]))
        elif not isinstance(arr, _SparseChunk):
            nz = np.flatnonzero(arr != -1)
            if _sparse_pays(len(nz), n, arr.itemsize):
                chunk[k] = _SparseChunk(nz, arr[nz])


def _merge_sparse(parts: list[Any], lens: list[int], inv: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Batch parts (dense arrays, _SparseChunk, or None: absent) -> (sorted final row numbers, values) of present
    entries (at least one part is not None)."""
    rows_l, vals_l = [], []
    off = 0
    for part, ln in zip(parts, lens, strict=True):
        if part is None:
            off += ln
            continue
        if isinstance(part, _SparseChunk):
            r, v = part.rows, part.values
        else:
            r = np.flatnonzero(part != -1)
            v = part[r]
        rows_l.append(inv[r + off])
        vals_l.append(v)
        off += ln
    rows = np.concatenate(rows_l)
    vals = np.concatenate(vals_l)
    keep = rows >= 0  # rows dropped for a missing ts
    rows, vals = rows[keep], vals[keep]
    o = np.argsort(rows, kind="stable")
    return rows[o], vals[o]


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    """The batches' parts of a column as one array (the part itself when there is one: it is not modified)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _inverse(order: np.ndarray, n_all: int) -> np.ndarray:
    """Batch row -> final row of the sorted table (-1 for the rows ``order`` drops)."""
    inv = np.full(n_all, -1, dtype=np.int64)
    inv[order] = np.arange(len(order), dtype=np.int64)
    return inv


def assemble_events(
    chunks: list[dict[str, Any]], extra: list[tuple[int, dict[str, Any]]], path: str
) -> tuple[Events, dict[int, dict[str, Any]]]:
    """The batches' chunks (emptied as they are read) -> the ``Events`` table sorted by ts, and ``extra`` ((batch
    row, args) of rare categories) keyed by final row. Events without a numeric ts are dropped (logged)."""
    if not chunks:
        return Events.empty(), {}
    lens = [len(c["ts"]) for c in chunks]
    ts = _joined([c.pop("ts") for c in chunks])
    nan_ts = np.isnan(ts)
    n_bad = int(np.count_nonzero(nan_ts))
    if n_bad:
        logger.warning("%s: %d complete events without a numeric ts dropped", path, n_bad)
        order = np.argsort(np.where(nan_ts, np.inf, ts), kind="stable")[: len(ts) - n_bad]
    else:
        order = np.argsort(ts, kind="stable")
    del nan_ts
    cols = {"ts": ts[order]}
    sparse: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    n_all, n = len(ts), len(order)
    trim = n_all >= _TRIM_EACH_COLUMN_ROWS
    del ts
    inv: np.ndarray | None = None  # batch row -> final row (-1: dropped)
    # one column at a time: peak memory is the model plus two columns, not two models
    for k in list(chunks[0]):
        parts = [c.pop(k) for c in chunks]
        if all(p is None for p in parts):  # no event has it
            dtype = EVENT_DTYPES[k]
            if _sparse_pays(0, n, np.dtype(dtype).itemsize):
                sparse[k] = (_NO_ROWS, np.empty(0, dtype=dtype))
            else:
                cols[k] = np.full(n, -1, dtype=dtype)
        elif all(isinstance(p, np.ndarray) for p in parts):
            col = _joined(parts)[order]
            del parts
            nz = np.flatnonzero(col != -1) if k in _SPARSE_CANDIDATES else None
            if nz is not None and _sparse_pays(len(nz), n, col.itemsize):
                sparse[k] = (nz, col[nz])
            else:
                cols[k] = col
            del col, nz
        else:
            if inv is None:
                inv = _inverse(order, n_all)
            rows, vals = _merge_sparse(parts, lens, inv)
            del parts
            dtype = EVENT_DTYPES[k]
            if _sparse_pays(len(rows), n, np.dtype(dtype).itemsize):
                sparse[k] = (rows, vals.astype(dtype, copy=False))
            else:
                dense = np.full(n, -1, dtype=dtype)
                dense[rows] = vals
                cols[k] = dense
        if trim:
            release_free_memory()  # the chunk arrays just freed are small heap blocks: hand them back now
    del chunks
    events = Events(**cols, sparse=sparse)
    del cols
    new_extra: dict[int, dict[str, Any]] = {}
    if extra:
        new_row = (inv if inv is not None else _inverse(order, n_all))[[r for r, _ in extra]].tolist()
        new_extra = {r: a for r, (_, a) in zip(new_row, extra, strict=True) if r >= 0}
    return events, new_extra


def assemble_flows(chunks: list[dict[str, np.ndarray]]) -> Flows:
    """The batches' flow chunks (emptied as they are read) -> ``Flows`` sorted by ts."""
    if not chunks:
        return Flows.empty()
    ts = _joined([c.pop("ts") for c in chunks])
    order = np.argsort(ts, kind="stable")
    cols = {"ts": ts[order]}
    del ts
    for k in (k for k in Flows.DTYPES if k != "ts"):  # one column at a time, as for events
        cols[k] = _joined([c.pop(k) for c in chunks])[order]
        if len(order) >= _TRIM_EACH_COLUMN_ROWS:
            release_free_memory()
    return Flows(**cols)


def memory_table(rows: list[tuple[Any, ...]], interner: Interner) -> MemoryEvents:
    """``[memory]`` events from their (ts, pid, tid, bytes, total allocated, total reserved, device type, device
    id) JSON values, sorted by ts."""
    if not rows:
        return MemoryEvents.empty()
    ts, pid, tid, b, alloc, resv, dtype, did = zip(*rows, strict=True)
    m = MemoryEvents(
        ts=float_column(list(ts)),
        pid=interner.proc_ids(list(pid)),
        tid=interner.proc_ids(list(tid)),
        bytes=int_column(list(b), np.int64),
        total_allocated=int_column(list(alloc), np.int64),
        total_reserved=int_column(list(resv), np.int64),
        device_type=int_column(list(dtype), np.int8),
        device_id=int_column(list(did), np.int16),
    )
    return m.take(np.argsort(m.ts, kind="stable"))


def instants_table(rows: list[tuple[Any, ...]], interner: Interner) -> Instants:
    """Instant events from their (ts, name, pid, tid) JSON values, sorted by ts."""
    if not rows:
        return Instants.empty()
    ts, name, pid, tid = zip(*rows, strict=True)
    i = Instants(
        ts=float_column(list(ts)),
        name=np.array(interner.ids(list(name)), dtype=np.int32),
        pid=interner.proc_ids(list(pid)),
        tid=interner.proc_ids(list(tid)),
    )
    return i.take(np.argsort(i.ts, kind="stable"))

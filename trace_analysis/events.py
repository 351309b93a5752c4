"""``Events``: the complete events of one trace as parallel numpy columns (the column list is in the
``dyno.trace_analysis.model`` docstring, which re-exports ``Events`` and ``EVENT_DTYPES``).

Sub-tables are lazy (row numbers into the full table) and mostly-absent integer columns are held sparse; both are
invisible to readers, who always see plain dense numpy columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["EVENT_DTYPES", "Events"]


_EVENT_COLUMNS: dict[str, Any] = {
    "ts": np.float64,
    "dur": np.float64,
    "cat": np.int8,
    "name": np.int32,
    "pid": np.int64,
    "tid": np.int64,
    "stream": np.int64,
    "correlation": np.int64,
    "external_id": np.int64,
    "device": np.int16,
    "bytes": np.int64,
    "seq": np.int64,
    "input_dims": np.int32,
    "input_types": np.int32,
    "coll_name": np.int32,
    "in_nelems": np.int64,
    "out_nelems": np.int64,
    "group_size": np.int32,
    "dtype": np.int32,
}


EVENT_DTYPES: Mapping[str, Any] = _EVENT_COLUMNS  # column name -> numpy dtype of Events columns
_ALL_EVENT_COLUMNS = (*_EVENT_COLUMNS, "index")
_KEEP_GATHERED_ROWS = 1 << 16


def _column(name: str) -> property:
    def get(self: Events) -> np.ndarray:
        col = self._cols.get(name)
        if col is None:
            # Kept only for small tables: overlapping big sub-tables would each hold a copy of the same rows
            # (a gather of a few hundred thousand rows costs about a millisecond; memory is scarcer on big traces)
            col = self._load(name)
            if self._n <= _KEEP_GATHERED_ROWS:
                self._cols[name] = col
        return col

    return property(get, doc=f"column {name!r}")


def _densify(sparse: tuple[np.ndarray, np.ndarray], rows: np.ndarray | None, n: int, dtype: Any) -> np.ndarray:
    """Dense column (-1 where absent) from (sorted row numbers, values), for all rows or for ``rows``."""
    sp_rows, sp_vals = sparse
    out = np.full(n, -1, dtype=dtype)
    if rows is None:
        out[sp_rows] = sp_vals
    elif len(sp_rows) and n:
        pos = np.minimum(np.searchsorted(sp_rows, rows), len(sp_rows) - 1)
        hit = sp_rows[pos] == rows
        out[hit] = sp_vals[pos[hit]]
    return out


class Events:
    """Complete events as parallel numpy columns (see the module docstring), all the same length.

    ``index`` maps rows of a sub-table back to rows of ``Trace.events`` (identity for the full table).
    Sub-tables from ``take`` / ``Trace.events_of`` are lazy: they hold row numbers into the full table and gather
    a column when it is read (kept only for tables up to 65,536 rows: bind a column to a local before reading it
    in a loop), so a big sub-table costs 8 bytes per row. Treat tables and their columns as immutable.
    """

    __slots__ = ("_cols", "_sparse", "_root", "_rows", "_n")
    COLUMNS = tuple(_EVENT_COLUMNS)

    def __init__(self, *, sparse: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None, **columns: np.ndarray):
        """All columns as arrays (``index`` optional: 0..n-1); ``sparse`` may hold some integer columns as
        (sorted row numbers, values) for columns that are mostly absent (-1): they are expanded when read."""
        sparse = dict(sparse or {})
        missing = [k for k in _EVENT_COLUMNS if k not in columns and k not in sparse]
        if missing:
            raise TypeError(f"Events() missing columns: {missing}")
        self._cols: dict[str, np.ndarray] = {k: columns[k] for k in _ALL_EVENT_COLUMNS if k in columns}
        self._sparse: dict[str, tuple[np.ndarray, np.ndarray]] = sparse
        self._root: Events | None = None
        self._rows: np.ndarray | None = None
        self._n = int(len(columns["ts"]))

    @classmethod
    def _lazy(cls, root: Events, rows: np.ndarray) -> Events:
        ev = cls.__new__(cls)
        ev._cols = {}
        ev._sparse = {}
        ev._root = root
        ev._rows = rows
        ev._n = int(len(rows))
        return ev

    def _load(self, name: str) -> np.ndarray:
        """A column not held yet: expand a sparse column, make the identity index, or gather from the root."""
        root, rows = self._root, self._rows
        if root is None:
            if name == "index":
                return np.arange(self._n, dtype=np.int64)
            return _densify(self._sparse[name], None, self._n, _EVENT_COLUMNS[name])
        assert rows is not None
        if name in root._cols:
            return root._cols[name][rows]
        if name == "index":
            return rows.copy()
        if root._n <= _KEEP_GATHERED_ROWS:
            # small trace: expand the root's column once (it keeps it) and gather, instead of a bisection of the
            # sparse rows for every sub-table that reads the column (same values)
            return getattr(root, name)[rows]
        return _densify(root._sparse[name], rows, self._n, _EVENT_COLUMNS[name])

    ts = _column("ts")
    dur = _column("dur")
    cat = _column("cat")
    name = _column("name")
    pid = _column("pid")
    tid = _column("tid")
    stream = _column("stream")
    correlation = _column("correlation")
    external_id = _column("external_id")
    device = _column("device")
    bytes = _column("bytes")
    seq = _column("seq")
    input_dims = _column("input_dims")
    input_types = _column("input_types")
    coll_name = _column("coll_name")
    in_nelems = _column("in_nelems")
    out_nelems = _column("out_nelems")
    group_size = _column("group_size")
    dtype = _column("dtype")
    index = _column("index")

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:
        kind = "lazy sub-table" if self._root is not None else "table"
        return f"Events({self._n} rows, {kind})"

    @property
    def end(self) -> np.ndarray:
        return self.ts + self.dur

    def take(self, rows: np.ndarray) -> Events:
        """Sub-table of the given rows (boolean mask or integer indices). Lazy (see class docstring); an all-true
        mask returns ``self``."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            if len(rows) != self._n:
                raise IndexError(f"boolean mask of length {len(rows)} for {self._n} rows")
            if rows.all():
                return self
            rows = rows.nonzero()[0]  # np.flatnonzero of a 1-D mask, without its Python wrappers
        rows = rows.astype(np.int64, copy=False)
        if self._root is None:
            return Events._lazy(self, rows)
        assert self._rows is not None
        return Events._lazy(self._root, self._rows[rows])

    def materialize(self) -> Events:
        """A table owning all its columns (detached from the root table)."""
        return Events(**{k: getattr(self, k) for k in _ALL_EVENT_COLUMNS})

    @classmethod
    def empty(cls) -> Events:
        cols: dict[str, Any] = {k: np.empty(0, dtype=t) for k, t in _EVENT_COLUMNS.items()}
        return cls(**cols, index=np.empty(0, dtype=np.int64))

    @classmethod
    def from_columns(cls, columns: Mapping[str, np.ndarray]) -> Events:
        """Build from a mapping of column arrays (missing integer columns filled with -1), sorted by ts."""
        n = len(columns["ts"])
        cols: dict[str, Any] = {}
        for k, t in _EVENT_COLUMNS.items():
            if k in columns:
                cols[k] = np.asarray(columns[k], dtype=t)
            else:
                cols[k] = np.full(n, -1, dtype=t) if k not in ("ts", "dur") else np.zeros(n, dtype=t)
        order = np.argsort(cols["ts"], kind="stable")
        if n and not np.all(order[:-1] < order[1:]):
            cols = {k: v[order] for k, v in cols.items()}
        return cls(**cols, index=np.arange(n, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """Bytes held by this table's own arrays (materialized columns, sparse columns and row numbers)."""
        own = sum(c.nbytes for c in self._cols.values())
        own += sum(r.nbytes + v.nbytes for r, v in self._sparse.values())
        return own + (self._rows.nbytes if self._rows is not None else 0)

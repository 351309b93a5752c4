"""Turn parsed batches of trace events into the columnar model (``TraceBuilder``), block by block.

Used by ``dyno.trace_analysis.loader``. Batches come as column buffers from the native decoder (``_native.c``,
when built: the common case), as ``Event`` structs from the typed decoder (``eventdecode``, read with C-level
``map``/``attrgetter`` passes) or as plain JSON values from orjson (the general path for anything the typed
decoder declines). All paths end in the same chunk code, and the tests check they give the same model. Each batch
becomes numpy column chunks right away (mostly-absent integer columns stored sparse), and ``build`` assembles the
sorted ``Trace`` one column at a time to bound peak memory.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from collections.abc import Callable, Iterable
from itertools import repeat
from operator import attrgetter, is_not, itemgetter
from typing import Any, cast

import msgspec
import numpy as np
import orjson

from dyno.trace_analysis.eventdecode import (
    EMPTY_ARGS,
    Event,
    NativeBatch,
    decode_events,
    decode_native,
    element_texts,
)
from dyno.trace_analysis.jsonscan import ScanError
from dyno.trace_analysis.model import (
    CAT_BY_NAME,
    EVENT_DTYPES,
    EXTRA_ARGS_CATS,
    FLOW_FINISH,
    FLOW_START,
    FLOW_STEP,
    Cat,
    Events,
    Flows,
    Instants,
    MemoryEvents,
    StringTable,
    Trace,
    TraceMeta,
)

__all__ = ["TraceBuilder", "decode_batch", "decode_fast", "release_free_memory"]

logger = logging.getLogger(__name__)

_EMPTY: dict[str, Any] = {}
_EXTRA_CATS = frozenset(int(c) for c in EXTRA_ARGS_CATS)
_FLOW_PHASE = {"s": FLOW_START, "f": FLOW_FINISH, "t": FLOW_STEP}
_EXTRA_CAT_TABLE = np.zeros(max(int(c) for c in Cat) + 1, dtype=bool)
_EXTRA_CAT_TABLE[list(_EXTRA_CATS)] = True
# Event struct fields read per complete / flow event, and one getter per args column (all run in C)
# (one map per field is about twice as fast as zip(*map(attrgetter(all fields))) here)
_X_FIELDS = tuple(attrgetter(f) for f in ("ts", "dur", "cat", "name", "pid", "tid", "args"))
_FLOW_FIELDS = tuple(attrgetter(f) for f in ("id", "ts", "pid", "tid", "ph", "cat"))
_PH = attrgetter("ph")
_PH_GROUP = {"X": 0, "s": 1, "f": 1, "t": 1}  # complete, flow; anything else: 2
_INT_TYPE = {int}
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# float64 bounds [lo, hi) of each integer dtype's values (both exact powers of two)
_INT_RANGE = {
    np.dtype(t): (float(np.iinfo(t).min), float(np.iinfo(t).max) + 1) for t in (np.int8, np.int16, np.int32, np.int64)
}
_CAT_CODES: dict[Any, int] = {k: int(v) for k, v in CAT_BY_NAME.items()}  # cat value -> Cat code (grows as seen)
# integer columns that may be stored sparse (see Events)
_SPARSE_CANDIDATES = frozenset(
    {"stream", "correlation", "external_id", "device", "bytes", "seq", "input_dims", "input_types", "coll_name"}
    | {"in_nelems", "out_nelems", "group_size", "dtype"}
)
_SHAPE_KEYS = frozenset({"Input Dims", "Input type"})
# (column, args key, dtype) of the integer columns taken from args
_ARG_INT_COLUMNS = (
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
_ARG_GETTERS = {
    col: attrgetter(col)
    for col in (*(c for c, _, _ in _ARG_INT_COLUMNS), "input_dims", "input_types", "coll_name", "dtype")
}


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
# Below this many rows, build() does not hand freed memory back after each column (malloc_trim costs ~0.1 ms a
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


def _sparsify(chunk: dict[str, Any]) -> None:
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


def _parse_elements(view: memoryview, spans: np.ndarray, rows: list[int]) -> list[Any]:
    """The elements ``rows`` of a batch (``spans``: start, end byte of each element) parsed with orjson, in one
    call; when that fails, one by one, so that the error names the first bad element as ``_parse_element`` does."""
    bounds = spans.reshape(-1, 2)[rows].tolist()
    texts = [view[lo:hi] for lo, hi in bounds]
    try:
        return cast("list[Any]", orjson.loads(b"".join((b"[", b",".join(texts), b"]"))))
    except orjson.JSONDecodeError:
        return [_parse_element(t.tobytes()) for t in texts]


def _parse_element(text: bytes) -> Any:
    """One element's JSON with orjson. The typed decoder skips unused keys without validating them, so orjson can
    still find invalid JSON there (e.g. bad UTF-8): reported like invalid JSON found while scanning."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise ScanError(f"invalid JSON in traceEvents (element {text[:60]!r}...): {e}") from None


def _args(e: dict[str, Any]) -> dict[str, Any]:
    """An event's args; anything but a JSON object (a list, a string) counts as no args."""
    a = e.get("args")
    return a if type(a) is dict else _EMPTY


def _gather(items: list[Any], rows: list[int]) -> list[Any]:
    """items[rows] as a list, gathered in C."""
    if len(rows) > 1:
        return list(itemgetter(*rows)(items))
    return [items[r] for r in rows]


def _int_column(values: list[Any], dtype: Any) -> np.ndarray:
    """Integer column from JSON values (None / missing -> -1; numeric strings accepted)."""
    try:
        arr = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        arr = np.array([_to_float(v) for v in values], dtype=np.float64)
    return _nan_to_int(arr, dtype)


def _nan_to_int(arr: np.ndarray, dtype: Any) -> np.ndarray:
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


def _float_column(values: list[Any]) -> np.ndarray:
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([_to_float(v) for v in values], dtype=np.float64)


class TraceBuilder:
    """Accumulates column chunks block by block, then assembles the Trace."""

    def __init__(self) -> None:
        self.strings = StringTable()
        self.ev_chunks: list[dict[str, Any]] = []
        self.n_events = 0
        self.extra: list[tuple[int, dict[str, Any]]] = []
        self.flow_chunks: list[dict[str, np.ndarray]] = []
        self.memory: list[tuple[Any, ...]] = []
        self.instants: list[tuple[Any, ...]] = []
        self.process_names: dict[int, str] = {}
        self.thread_names: dict[tuple[int, int], str] = {}
        self.float_ts = False
        self.raw: bytes | bytearray = b""  # raw JSON of the current batch
        self._last = False  # the current batch is the last one
        self._raw_json_ids_known: dict[bytes, int] = {}

    # -- interning helpers -------------------------------------------------------------------------
    def _ids(self, values: Any) -> list[int]:
        table = self.strings
        try:
            out = list(map(table._ids.get, values))  # fast path: one dict hit per value, in C
        except TypeError:  # an unhashable value (e.g. a list as name)
            out = [None] * len(values)
        if None in out:  # new strings, or values that are not strings
            out = [
                i if i is not None else table.intern(v if type(v) is str else ("" if v is None else str(v)))
                for i, v in zip(out, values, strict=True)
            ]
        return out  # type: ignore[return-value]

    def _proc_ids(self, values: Any) -> np.ndarray:
        """pid/tid column: ints kept, anything else (e.g. "Spans") -> -(1 + string id)."""
        if set(map(type, values)) <= _INT_TYPE:
            try:
                return np.array(values, dtype=np.int64)
            except OverflowError:  # beyond int64: kept as a label, as a string is
                pass
        out = [
            v if type(v) is int and _INT64_MIN <= v <= _INT64_MAX else -(1 + self.strings.intern(str(v)))
            for v in values
        ]
        return np.array(out, dtype=np.int64)

    @staticmethod
    def _cat(c: Any) -> int:
        try:
            code = _CAT_CODES.get(c)
        except TypeError:  # unhashable (a list as category)
            return int(Cat.OTHER)
        if code is None:
            code = int(CAT_BY_NAME.get(str(c).lower(), Cat.OTHER)) if c is not None else int(Cat.OTHER)
            if len(_CAT_CODES) < 4096:  # shared by all loads: bounded against files with endless odd categories
                _CAT_CODES[c] = code
        return code

    def _json_ids(self, values: Any) -> list[int]:
        """String ids of values serialized as compact JSON; -1 for None / JSON null."""
        return [-1 if v is None else self.strings.intern(orjson.dumps(v).decode()) for v in values]

    def _raw_json_ids(self, values: list[msgspec.Raw | None]) -> np.ndarray:
        """``_json_ids`` of raw JSON texts from the typed decoder (None where absent): each distinct text is
        re-serialized once, so both parsers give the same strings."""
        out = np.full(len(values), -1, dtype=np.int32)
        present = np.fromiter(map(is_not, values, repeat(None)), dtype=bool, count=len(values))
        texts = list(map(bytes, filter(None, values)))  # a Raw is never empty, hence truthy
        known = self._raw_json_ids_known
        ids = list(map(known.get, texts))
        if None in ids:
            self._learn_raw_texts(t for t, i in zip(texts, ids, strict=True) if i is None)
            ids = list(map(known.__getitem__, texts))
        out[present] = cast("list[int]", ids)  # every None was resolved above
        return out

    def _learn_raw_texts(self, texts: Iterable[bytes]) -> None:
        """Intern the compact JSON of raw texts not seen yet, in first-seen order (JSON null -> -1)."""
        known = self._raw_json_ids_known
        for text in dict.fromkeys(texts):
            if text not in known:
                parsed = orjson.loads(text)
                known[text] = -1 if parsed is None else self.strings.intern(orjson.dumps(parsed).decode())

    # -- one block ---------------------------------------------------------------------------------
    def add(
        self, items: list[Any] | NativeBatch, batch: bytes | bytearray | memoryview = b"", last: bool = False
    ) -> None:
        """One batch: native columns, ``Event`` structs (typed decoder) or JSON values (general parser); ``batch``:
        its raw JSON (native and struct batches re-parse from it the few events that need more); ``last``: no batch
        follows (its columns stay dense until ``build``: a one-batch file is then assembled with whole-column
        operations; earlier batches go sparse at once, while their columns are still in the CPU cache)."""
        self._last = last
        if isinstance(items, NativeBatch):
            self._add_native(items.cols, batch)
            return
        if isinstance(batch, memoryview):  # the other paths search the raw JSON for keys
            batch = batch.tobytes()
        self.raw = batch
        if items and type(items[0]) is Event and batch:
            self._add_structs(items, batch)
        else:
            self._add_values(items)

    def _add_values(self, items: list[Any]) -> None:
        xs = []
        flows = []
        for e in items:
            if type(e) is not dict:
                continue
            ph = e.get("ph")
            if type(ph) is not str:  # no phase we read (a list would not even hash)
                continue
            if ph == "X":
                xs.append(e)
            elif ph in _FLOW_PHASE:
                flows.append((e.get("id"), e.get("ts"), e.get("pid"), e.get("tid"), ph, e.get("cat")))
            elif ph == "i" or ph == "I":
                if e.get("name") == "[memory]":
                    a = _args(e)
                    self.memory.append(
                        (
                            e.get("ts"),
                            e.get("pid"),
                            e.get("tid"),
                            a.get("Bytes"),
                            a.get("Total Allocated"),
                            a.get("Total Reserved"),
                            a.get("Device Type"),
                            a.get("Device Id"),
                        )
                    )
                else:
                    self.instants.append((e.get("ts"), e.get("name"), e.get("pid"), e.get("tid")))
            elif ph == "M":
                self._metadata_event(e)
        if xs:
            args = [_args(e) for e in xs]
            cats = [self._cat(e.get("cat")) for e in xs]
            extra = [(i, args[i]) for i, c in enumerate(cats) if c in _EXTRA_CATS and args[i]]
            self._add_complete(
                [e.get("ts") for e in xs],
                [e.get("dur", 0) for e in xs],
                cats,
                [e.get("name", "") for e in xs],
                [e.get("pid") for e in xs],
                [e.get("tid") for e in xs],
                lambda col, key: [a.get(key) for a in args],
                extra,
                typed=False,
            )
        if flows:
            self._add_flows(*zip(*flows, strict=True))

    def _add_structs(self, evs: list[Event], batch: bytes | bytearray) -> None:
        # group the events by phase with C-level passes (a Python loop over every event cost ~0.4 µs each)
        group = np.fromiter(map(_PH_GROUP.get, map(_PH, evs), repeat(2)), dtype=np.int8, count=len(evs))
        x_rows = np.flatnonzero(group == 0).tolist()  # element number of each complete event
        xs = _gather(evs, x_rows)
        flows = _gather(evs, np.flatnonzero(group == 1).tolist())
        rest = np.flatnonzero(group == 2).tolist()
        texts: list[bytes] = element_texts(batch) if rest else []
        if rest:
            # instants, [memory] and metadata events are few: parse them the general way from their own bytes
            self._add_values([_parse_element(texts[i]) for i in rest])
        if xs:
            ts, dur, cat, name, pid, tid, args = [list(map(get, xs)) for get in _X_FIELDS]
            try:
                codes: list[int | None] = list(map(_CAT_CODES.get, cat))
            except TypeError:  # an unhashable category
                codes = [None]
            cats: list[int] = [self._cat(c) for c in cat] if None in codes else cast("list[int]", codes)
            extra = []
            for i in np.flatnonzero(_EXTRA_CAT_TABLE[np.array(cats, dtype=np.int8)]).tolist():
                if args[i] is not None:
                    # rare categories keep their whole args dict: parse just that element again
                    texts = texts or element_texts(batch)
                    a = _parse_element(texts[x_rows[i]]).get("args")
                    if a:
                        extra.append((i, a))
            args_l = [a if a is not None else EMPTY_ARGS for a in args]
            self._add_complete(
                ts,
                dur,
                cats,
                name,
                pid,
                tid,
                lambda col, key: list(map(_ARG_GETTERS[col], args_l)),
                extra,
                typed=True,
            )
        if flows:
            self._add_flows(*[list(map(get, flows)) for get in _FLOW_FIELDS])

    def _add_native(self, c: dict[str, Any], batch: bytes | bytearray | memoryview) -> None:
        """A batch from the native decoder: the same steps as ``_add_structs`` on column buffers, each distinct
        string of a field handled once (interned in first-seen order, as the other paths do)."""
        rest = np.flatnonzero(np.frombuffer(c["group"], dtype=np.int8) == 2)
        n = c["x_n"]
        if n:
            cats = np.array([self._cat(v) for v in c["x_cat_u"]], dtype=np.int8)[np.frombuffer(c["x_cat"], np.int32)]
            # rare categories keep their whole args: those events are parsed again, with the rest
            extra_rows = np.flatnonzero(_EXTRA_CAT_TABLE[cats] & (np.frombuffer(c["x_has_args"], dtype=np.uint8) != 0))
            x_rows = np.frombuffer(c["x_rows"], dtype=np.int64)
            again = [*rest.tolist(), *x_rows[extra_rows].tolist()]
        else:
            again = rest.tolist()
        # instants, [memory], metadata and the rare categories' events: one orjson call for all of them
        parsed = _parse_elements(memoryview(batch), np.frombuffer(c["spans"], dtype=np.int64), again) if again else []
        if len(rest):
            self._add_values(parsed[: len(rest)])
        if n:
            self.float_ts = self.float_ts or c["x_float_ts"]
            extra = []
            for i, e in zip(extra_rows.tolist(), parsed[len(rest) :], strict=True):
                a = e.get("args")
                if a:
                    extra.append((i, a))
            cols: dict[str, np.ndarray | None] = {
                "ts": np.frombuffer(c["x_ts"], dtype=np.float64),
                "dur": np.frombuffer(c["x_dur"], dtype=np.float64),
                "cat": cats,
                "name": self._native_ids(c["x_name"], c["x_name_u"]),
                "pid": self._native_proc_ids(c, "x_pid"),
                "tid": self._native_proc_ids(c, "x_tid"),
            }
            for col, _, dtype in _ARG_INT_COLUMNS:
                present = c[f"x_{col}_n"]
                arr = np.frombuffer(c[f"x_{col}"], dtype=np.float64)
                cols[col] = _nan_to_int(arr, dtype) if present else None
            for col in ("input_dims", "input_types"):
                cols[col] = self._native_json_ids(c[f"x_{col}"], c[f"x_{col}_u"]) if c[f"x_{col}_u"] else None
            for col in ("coll_name", "dtype"):
                cols[col] = self._native_ids(c[f"x_{col}"], c[f"x_{col}_u"]) if c[f"x_{col}_u"] else None
            self._store_complete(cols, extra, n)
        if c["f_n"]:
            self.flow_chunks.append(
                {
                    "id": _nan_to_int(np.frombuffer(c["f_id"], dtype=np.float64), np.int64),
                    "ts": np.frombuffer(c["f_ts"], dtype=np.float64),
                    "pid": self._native_proc_ids(c, "f_pid"),
                    "tid": self._native_proc_ids(c, "f_tid"),
                    "phase": np.frombuffer(c["f_phase"], dtype=np.int8),
                    "cat": self._native_ids(c["f_cat"], c["f_cat_u"]),
                }
            )

    def _native_ids(self, local: bytearray, strings: list[str]) -> np.ndarray:
        """Global string ids of a native string column: local ids into ``strings`` (-1: absent, kept)."""
        ids = np.array([*self.strings.intern_all(strings), -1], dtype=np.int32)
        return ids[np.frombuffer(local, dtype=np.int32)]  # local -1 picks the appended -1

    def _native_json_ids(self, local: bytearray, values: list[str | bytes]) -> np.ndarray:
        """Ids of a native raw-JSON column: each distinct value is its compact JSON (str) where the native decoder
        could write it exactly, else its raw text (bytes), normalized here as ``_raw_json_ids`` does."""
        known = self._raw_json_ids_known
        table = self.strings
        by_text = cast("dict[str | bytes, int]", table._ids)  # a bytes value is simply never found
        ids: list[int | None] = list(map(by_text.get, values))  # most repeat across batches: one dict hit each
        for i in [i for i, v in enumerate(ids) if v is None]:  # first-seen order, as the other paths intern them
            v = values[i]
            if isinstance(v, str):
                ids[i] = table.intern(v)
            else:
                if v not in known:
                    self._learn_raw_texts((v,))
                ids[i] = known[v]
        ids.append(-1)
        return np.array(ids, dtype=np.int32)[np.frombuffer(local, dtype=np.int32)]  # local -1 -> the appended -1

    def _native_proc_ids(self, c: dict[str, Any], key: str) -> np.ndarray:
        """pid/tid column of a native batch: ints kept, strings -> -(1 + string id) as in ``_proc_ids``."""
        vals = np.frombuffer(c[key], dtype=np.int64)
        if c[key + "_s"] is None:
            return vals
        ids = np.array([-(1 + self.strings.intern(s)) for s in c[key + "_u"]], dtype=np.int64)
        local = np.frombuffer(c[key + "_s"], dtype=np.int32)
        return np.where(local >= 0, ids[local], vals)

    def _metadata_event(self, e: dict[str, Any]) -> None:
        name = _args(e).get("name")
        if name is None:
            return
        pid, tid = e.get("pid"), e.get("tid")
        if e.get("name") == "process_name" and type(pid) is int:
            self.process_names[pid] = str(name)
        elif e.get("name") == "thread_name" and type(pid) is int and type(tid) is int:
            self.thread_names[(pid, tid)] = str(name)

    def _add_complete(
        self,
        ts: Any,
        dur: Any,
        cats: list[int],
        names: Any,
        pids: Any,
        tids: Any,
        arg_values: Callable[[str, str], list[Any]],
        extra: list[tuple[int, dict[str, Any]]],
        typed: bool,
    ) -> None:
        """Columns of one batch of complete events from per-field value sequences; ``arg_values(column, key)``
        gives the args values of one key (None where absent); ``extra``: (batch row, args) of rare categories;
        ``typed``: the values come from ``Event`` structs (else from dicts, and each args key is first looked for in
        the batch's raw JSON)."""
        n = len(ts)
        if not self.float_ts and float in set(map(type, ts)):
            self.float_ts = True
        cols: dict[str, np.ndarray | None] = {
            "ts": _float_column(ts),
            "dur": _float_column(dur),
            "cat": np.array(cats, dtype=np.int8),
            "name": np.array(self._ids(names), dtype=np.int32),
            "pid": self._proc_ids(pids),
            "tid": self._proc_ids(tids),
        }
        # args columns. General path: a key absent from the batch's raw JSON is skipped without touching the
        # dicts. Struct path: reading a field of every struct and counting the Nones is cheaper than that scan,
        # except for the shape keys (raw JSON values). Each key checks its own presence: keys that usually come
        # together (NCCL metadata, Input Dims / Input type) need not, and a batch must not lose one.
        raw = self.raw if not typed else b""
        shapes = {k: not self.raw or f'"{k}"'.encode() in self.raw for k in _SHAPE_KEYS}

        def values(col: str, key: str) -> list[Any] | None:
            """The key's values, None when no event has it."""
            if key in _SHAPE_KEYS:
                return arg_values(col, key) if shapes[key] else None
            if raw and f'"{key}"'.encode() not in raw:
                return None
            vals = arg_values(col, key)
            return None if vals.count(None) == n else vals

        for col, key, dtype in _ARG_INT_COLUMNS:
            vals = values(col, key)
            cols[col] = None if vals is None else _int_column(vals, dtype)
        for col, key in (("input_dims", "Input Dims"), ("input_types", "Input type")):
            vals = values(col, key)
            if vals is None:
                cols[col] = None
            else:
                cols[col] = self._raw_json_ids(vals) if typed else np.array(self._json_ids(vals), np.int32)
        for col, key in (("coll_name", "Collective name"), ("dtype", "dtype")):
            vals = values(col, key)
            if vals is None:
                cols[col] = None
            else:
                cols[col] = np.array([-1 if v is None else self.strings.intern(str(v)) for v in vals], np.int32)
        self._store_complete(cols, extra, n)

    def _store_complete(
        self, cols: dict[str, np.ndarray | None], extra: list[tuple[int, dict[str, Any]]], n: int
    ) -> None:
        """Keep one batch's columns as a chunk (mostly-absent integer columns sparse; None: a column no event of
        the batch has); ``extra`` as in ``_add_complete``."""
        dur = cast(np.ndarray, cols["dur"])
        bad_dur = ~(dur >= 0)  # NaN (no number) or negative (a broken clock): no duration
        if bad_dur.any():
            dur[bad_dur] = 0.0
        base = self.n_events
        if extra:
            self.extra.extend((base + i, a) for i, a in extra)
        chunk: dict[str, Any] = dict(cols)
        if not self._last:
            _sparsify(chunk)
        self.ev_chunks.append(chunk)
        self.n_events += n

    # -- assembly ----------------------------------------------------------------------------------
    def build(self, meta: TraceMeta) -> Trace:
        chunks, self.ev_chunks = self.ev_chunks, []
        if not chunks:
            return Trace(meta, self.strings, Events.empty(), self._flows(), self._memory(), self._instants(), {})
        lens = [len(c["ts"]) for c in chunks]
        ts = _joined([c.pop("ts") for c in chunks])
        nan_ts = np.isnan(ts)
        n_bad = int(np.count_nonzero(nan_ts))
        if n_bad:
            logger.warning("%s: %d complete events without a numeric ts dropped", meta.path, n_bad)
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
        extra: dict[int, dict[str, Any]] = {}
        if self.extra:
            new_row = (inv if inv is not None else _inverse(order, n_all))[[r for r, _ in self.extra]].tolist()
            extra = {r: a for r, (_, a) in zip(new_row, self.extra, strict=True) if r >= 0}
        return Trace(meta, self.strings, events, self._flows(), self._memory(), self._instants(), extra)

    def _add_flows(self, ids: Any, ts: Any, pid: Any, tid: Any, ph: Any, cat: Any) -> None:
        """Flow events of one batch, one sequence per field; stored as arrays right away (Python tuples would
        cost ~200 bytes per flow until the end)."""
        self.flow_chunks.append(
            {
                "id": _int_column(ids, np.int64),
                "ts": _float_column(ts),
                "pid": self._proc_ids(pid),
                "tid": self._proc_ids(tid),
                "phase": np.array(list(map(_FLOW_PHASE.__getitem__, ph)), dtype=np.int8),
                "cat": np.array(self._ids(cat), dtype=np.int32),
            }
        )

    def _flows(self) -> Flows:
        chunks, self.flow_chunks = self.flow_chunks, []
        if not chunks:
            return Flows.empty()
        ts = _joined([c.pop("ts") for c in chunks])
        order = np.argsort(ts, kind="stable")
        cols = {"ts": ts[order]}
        del ts
        for k in ("id", "pid", "tid", "phase", "cat"):  # one column at a time, as for events
            cols[k] = _joined([c.pop(k) for c in chunks])[order]
            if len(order) >= _TRIM_EACH_COLUMN_ROWS:
                release_free_memory()
        return Flows(**cols)

    def _memory(self) -> MemoryEvents:
        if not self.memory:
            return MemoryEvents.empty()
        ts, pid, tid, b, alloc, resv, dtype, did = zip(*self.memory, strict=True)
        m = MemoryEvents(
            ts=_float_column(list(ts)),
            pid=self._proc_ids(list(pid)),
            tid=self._proc_ids(list(tid)),
            bytes=_int_column(list(b), np.int64),
            total_allocated=_int_column(list(alloc), np.int64),
            total_reserved=_int_column(list(resv), np.int64),
            device_type=_int_column(list(dtype), np.int8),
            device_id=_int_column(list(did), np.int16),
        )
        order = np.argsort(m.ts, kind="stable")
        return MemoryEvents(**{k: getattr(m, k)[order] for k in m.__dataclass_fields__})

    def _instants(self) -> Instants:
        if not self.instants:
            return Instants.empty()
        ts, name, pid, tid = zip(*self.instants, strict=True)
        i = Instants(
            ts=_float_column(list(ts)),
            name=np.array(self._ids(list(name)), dtype=np.int32),
            pid=self._proc_ids(list(pid)),
            tid=self._proc_ids(list(tid)),
        )
        order = np.argsort(i.ts, kind="stable")
        return Instants(**{k: getattr(i, k)[order] for k in ("ts", "name", "pid", "tid")})


def decode_fast(batch: bytes | bytearray | memoryview) -> list[Any] | NativeBatch | None:
    """A speculative cut (see ``jsonscan``): native columns, else ``Event`` structs; None when both decline."""
    native = decode_native(batch)
    return native if native is not None else decode_events(batch)


def decode_batch(batch: bytes) -> list[Any] | NativeBatch:
    """Native columns or typed decoding when the batch fits (the common case), else the general parser (dicts),
    which also raises the error for invalid JSON."""
    native = decode_native(batch)
    if native is not None:
        return native
    evs = decode_events(batch)
    return evs if evs is not None else orjson.loads(batch)

"""Columnar model of one PyTorch profiler / Kineto trace (one rank), shared by every analysis and rule.

The loader (``dyno.trace_analysis.loader``) parses a Chrome-trace JSON file once into this model; the raw JSON
objects are dropped as soon as the columns are built. Everything below is plain numpy arrays plus an interned
string table, so analyses are vectorized and a trace of millions of events stays a few tens of bytes per event.

``Trace`` (one rank)
    ``events``: ``Events``, the complete (``ph == "X"``) events, sorted by ``ts`` (stable). Columns, all the same
    length, one row per event ("-1" means "absent" for every integer column):

    ============== ======= ==================================================================================
    ts             float64 start, µs (Kineto's unit). Fractional values of ns-resolution traces are kept as
                           parsed (float64: ~0.25 µs quantum at epoch-µs magnitudes, exact for ts < 2**43).
    dur            float64 duration, µs (``end`` = ts + dur is a property)
    cat            int8    category code, a ``Cat`` value (unknown categories -> ``Cat.OTHER``)
    name           int32   interned name id: ``trace.strings[name]``
    pid, tid       int64   process / thread (GPU rows: pid = device, tid = stream). Non-integer ids such as
                           ``"Spans"`` are stored as ``-(1 + string id)`` so they stay distinct and negative.
    stream         int64   args["stream"] (GPU rows and cuda_sync; 4294967295 = device-wide sync)
    correlation    int64   args["correlation"]: joins a cuda_runtime launch to its GPU activity
    external_id    int64   args["External id"]: joins a cpu_op to the runtime calls / kernels it caused
    device         int16   args["device"]
    bytes          int64   args["bytes"] (memcpy / memset)
    seq            int64   args["Sequence number"] (autograd forward/backward pairing)
    input_dims     int32   string id of args["Input Dims"] serialized as JSON (record_shapes), ``Trace.arg_json``
    input_types    int32   string id of args["Input type"] serialized as JSON
    coll_name      int32   string id of args["Collective name"] (NCCL metadata on kernels / record_param_comms)
    in_nelems      int64   args["In msg nelems"];  ``out_nelems``: args["Out msg nelems"]
    group_size     int32   args["Group size"];      ``dtype``: string id of args["dtype"]
    ============== ======= ==================================================================================

    Memory: sub-tables (``events_of``, ``take``) are lazy (row numbers into the full table; a column is gathered
    when read), and mostly-absent integer columns are held sparse as (rows, values) and expanded
    on read; both are invisible to readers, who always see plain dense numpy columns.

    ``extra_args``: ``{row: args dict}`` only for the rare rows whose category is in ``EXTRA_ARGS_CATS``
    (annotations, cuda_sync, Trace spans, unknown categories); hot categories keep only the columns above.

``flows``: ``Flows``, the flow events (``ph`` s / f / t: ``ac2g`` launch->kernel links and ``fwdbwd``
    forward->backward links), columns id, ts, pid, tid, phase (``FLOW_START`` / ``FLOW_FINISH`` /
    ``FLOW_STEP``), cat (string id), sorted by ts. ``Flows.pairs()`` matches starts with finishes.

``memory``: ``MemoryEvents``, the ``[memory]`` instant events (allocator): ts, pid, tid, bytes (signed delta),
    total_allocated, total_reserved, device_type, device_id.

``instants``: ``Instants``, other instant events (ts, name id, pid, tid).

``meta``: ``TraceMeta``: path, rank (distributedInfo.rank, else from the file name, else 0), world_size,
    distributed_info, device_properties, trace_id, host_name, base_time_ns (baseTimeNanoseconds),
    schema_version, display_time_unit, float_timestamps, process_names / thread_names (from ``M`` events),
    other top-level keys.

``MultiRankTrace``: the ranks of one job (``{rank: Trace}``) plus ``errors`` (``LoadError`` per bad file);
    one bad rank never stops the others.

Loading (``dyno.trace_analysis.loader``): ``load_trace(path) -> Trace``, ``load_traces(paths_or_folder) ->
MultiRankTrace``; both raise / record ``TraceLoadError`` (path + what is wrong).

Helpers: ``Trace.events_of(*cats)`` (cached sub-table), ``Trace.name_mask(events, predicate)`` (vectorized name
filter: the predicate runs once per distinct name), ``Trace.names(events)``, ``StringTable.lookup``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import IntEnum
from typing import Any

import numpy as np
import orjson

__all__ = [
    "Cat",
    "CAT_BY_NAME",
    "GPU_ACTIVITY_CATS",
    "GPU_CATS",
    "EXTRA_ARGS_CATS",
    "FLOW_START",
    "FLOW_FINISH",
    "FLOW_STEP",
    "StringTable",
    "Events",
    "EVENT_DTYPES",
    "Flows",
    "MemoryEvents",
    "Instants",
    "TraceMeta",
    "Trace",
    "LoadError",
    "MultiRankTrace",
]

logger = logging.getLogger(__name__)


class Cat(IntEnum):
    """Category codes of complete events (Kineto ``cat`` strings, see ``CAT_BY_NAME``). Compare columns with
    ``.value`` (``ev.cat == Cat.KERNEL.value``): numpy converts an IntEnum member ~5x slower than a plain int."""

    OTHER = 0
    KERNEL = 1
    GPU_MEMCPY = 2
    GPU_MEMSET = 3
    CUDA_RUNTIME = 4
    CUDA_DRIVER = 5
    CPU_OP = 6
    USER_ANNOTATION = 7
    GPU_USER_ANNOTATION = 8
    PYTHON_FUNCTION = 9
    CUDA_SYNC = 10
    CPU_INSTANT_EVENT = 11
    TRACE = 12  # the "PyTorch Profiler (0)" span
    CUDA_PROFILER_RANGE = 13
    OVERHEAD = 14
    PRIVATEUSE1_RUNTIME = 15
    PRIVATEUSE1_DRIVER = 16
    MTIA_RUNTIME = 17
    MTIA_CCP_EVENTS = 18


CAT_BY_NAME: Mapping[str, Cat] = {
    "kernel": Cat.KERNEL,
    "gpu_memcpy": Cat.GPU_MEMCPY,
    "gpu_memset": Cat.GPU_MEMSET,
    "cuda_runtime": Cat.CUDA_RUNTIME,
    "cuda_driver": Cat.CUDA_DRIVER,
    "cpu_op": Cat.CPU_OP,
    "operator": Cat.CPU_OP,  # older Kineto name
    "user_annotation": Cat.USER_ANNOTATION,
    "gpu_user_annotation": Cat.GPU_USER_ANNOTATION,
    "python_function": Cat.PYTHON_FUNCTION,
    "cuda_sync": Cat.CUDA_SYNC,
    "cpu_instant_event": Cat.CPU_INSTANT_EVENT,
    "trace": Cat.TRACE,
    "cuda_profiler_range": Cat.CUDA_PROFILER_RANGE,
    "overhead": Cat.OVERHEAD,
    "privateuse1_runtime": Cat.PRIVATEUSE1_RUNTIME,
    "privateuse1_driver": Cat.PRIVATEUSE1_DRIVER,
    "mtia_runtime": Cat.MTIA_RUNTIME,
    "mtia_ccp_events": Cat.MTIA_CCP_EVENTS,
}

# Work that occupies the GPU (what "GPU busy" means for dyno; HTA also counts cuda_sync rows, see docs).
GPU_ACTIVITY_CATS: tuple[Cat, ...] = (Cat.KERNEL, Cat.GPU_MEMCPY, Cat.GPU_MEMSET)
# Every row drawn on a GPU timeline.
GPU_CATS: tuple[Cat, ...] = (Cat.KERNEL, Cat.GPU_MEMCPY, Cat.GPU_MEMSET, Cat.CUDA_SYNC, Cat.GPU_USER_ANNOTATION)
# Rare categories whose full args dict is kept in Trace.extra_args.
EXTRA_ARGS_CATS: tuple[Cat, ...] = (
    Cat.OTHER,
    Cat.USER_ANNOTATION,
    Cat.GPU_USER_ANNOTATION,
    Cat.CUDA_SYNC,
    Cat.TRACE,
    Cat.CUDA_PROFILER_RANGE,
    Cat.CPU_INSTANT_EVENT,
)

FLOW_START = 0
FLOW_FINISH = 1
FLOW_STEP = 2


class StringTable:
    """Interned strings: id -> str via indexing, str -> id via ``lookup`` (-1 when absent)."""

    __slots__ = ("_strings", "_ids")

    def __init__(self, strings: Iterable[str] = ()) -> None:
        self._strings: list[str] = []
        self._ids: dict[str, int] = {}
        for s in strings:
            self.intern(s)

    def intern(self, s: str) -> int:
        i = self._ids.get(s)
        if i is None:
            i = len(self._strings)
            self._ids[s] = i
            self._strings.append(s)
        return i

    def intern_all(self, strings: Sequence[str]) -> list[int]:
        """``[self.intern(s) for s in strings]`` for a sequence of str, with the new strings added at once."""
        ids = self._ids
        out = list(map(ids.get, strings))
        if None in out:
            new = dict.fromkeys(s for s, i in zip(strings, out, strict=True) if i is None)
            base = len(self._strings)
            ids.update(zip(new, range(base, base + len(new)), strict=True))
            self._strings.extend(new)
            out = list(map(ids.__getitem__, strings))
        return out  # type: ignore[return-value]

    def lookup(self, s: str) -> int:
        return self._ids.get(s, -1)

    def __getitem__(self, i: int) -> str:
        return self._strings[int(i)]

    def __len__(self) -> int:
        return len(self._strings)

    def __iter__(self) -> Iterator[str]:
        return iter(self._strings)


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


@dataclass(frozen=True, eq=False)
class Flows:
    """Flow events (ph s / f / t), sorted by ts. ``cat`` is a string id ("ac2g", "fwdbwd", ...)."""

    id: np.ndarray  # int64
    ts: np.ndarray  # float64
    pid: np.ndarray  # int64
    tid: np.ndarray  # int64
    phase: np.ndarray  # int8: FLOW_START / FLOW_FINISH / FLOW_STEP
    cat: np.ndarray  # int32 string id

    def __len__(self) -> int:
        return int(self.ts.shape[0])

    def pairs(self, cat_id: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``(start_rows, finish_rows)`` of matched s/f pairs (same id and cat), optionally of one cat."""
        sel = np.ones(len(self), dtype=bool) if cat_id is None else self.cat == cat_id
        s_rows = np.flatnonzero(sel & (self.phase == FLOW_START))
        f_rows = np.flatnonzero(sel & (self.phase == FLOW_FINISH))
        if not len(s_rows) or not len(f_rows):
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        # key = (cat, id); ids are unique per category in Kineto output
        s_key = self.cat[s_rows].astype(np.int64) * (1 << 40) + self.id[s_rows]
        f_key = self.cat[f_rows].astype(np.int64) * (1 << 40) + self.id[f_rows]
        s_order = np.argsort(s_key, kind="stable")
        pos = np.searchsorted(s_key[s_order], f_key)
        pos = np.minimum(pos, len(s_order) - 1)
        hit = s_key[s_order][pos] == f_key
        return s_rows[s_order[pos[hit]]], f_rows[hit]

    @classmethod
    def empty(cls) -> Flows:
        return cls(
            id=np.empty(0, np.int64),
            ts=np.empty(0, np.float64),
            pid=np.empty(0, np.int64),
            tid=np.empty(0, np.int64),
            phase=np.empty(0, np.int8),
            cat=np.empty(0, np.int32),
        )


@dataclass(frozen=True, eq=False)
class MemoryEvents:
    """``[memory]`` instant events from the caching allocator (profile_memory=True), sorted by ts."""

    ts: np.ndarray  # float64
    pid: np.ndarray  # int64
    tid: np.ndarray  # int64
    bytes: np.ndarray  # int64, signed: + allocation, - free
    total_allocated: np.ndarray  # int64, -1 absent
    total_reserved: np.ndarray  # int64, -1 absent
    device_type: np.ndarray  # int8 (Kineto: 0 = CPU, 1 = CUDA)
    device_id: np.ndarray  # int16

    def __len__(self) -> int:
        return int(self.ts.shape[0])

    @classmethod
    def empty(cls) -> MemoryEvents:
        return cls(
            ts=np.empty(0, np.float64),
            pid=np.empty(0, np.int64),
            tid=np.empty(0, np.int64),
            bytes=np.empty(0, np.int64),
            total_allocated=np.empty(0, np.int64),
            total_reserved=np.empty(0, np.int64),
            device_type=np.empty(0, np.int8),
            device_id=np.empty(0, np.int16),
        )


@dataclass(frozen=True, eq=False)
class Instants:
    """Other instant events (ph i / I), sorted by ts."""

    ts: np.ndarray  # float64
    name: np.ndarray  # int32 string id
    pid: np.ndarray  # int64
    tid: np.ndarray  # int64

    def __len__(self) -> int:
        return int(self.ts.shape[0])

    @classmethod
    def empty(cls) -> Instants:
        return cls(
            ts=np.empty(0, np.float64), name=np.empty(0, np.int32), pid=np.empty(0, np.int64), tid=np.empty(0, np.int64)
        )


@dataclass(frozen=True)
class TraceMeta:
    """Top-level metadata of one trace file."""

    path: str
    rank: int
    world_size: int | None = None
    rank_source: str = "default"  # "distributedInfo" | "filename" | "default" | "order" (see load_traces)
    distributed_info: Mapping[str, Any] = field(default_factory=dict)
    device_properties: tuple[Mapping[str, Any], ...] = ()
    trace_id: str | None = None
    host_name: str | None = None
    base_time_ns: int | None = None
    schema_version: int | None = None
    display_time_unit: str | None = None
    float_timestamps: bool = False  # some ts were JSON floats (ns-resolution traces; HTA rounds these)
    process_names: Mapping[int, str] = field(default_factory=dict)
    thread_names: Mapping[tuple[int, int], str] = field(default_factory=dict)
    other: Mapping[str, Any] = field(default_factory=dict)

    def device_property(self, device: int) -> Mapping[str, Any] | None:
        for p in self.device_properties:
            if p.get("id") == device:
                return p
        return None


class Trace:
    """One rank's trace: events, flows, memory and instant events, strings, metadata (see module docstring)."""

    def __init__(
        self,
        meta: TraceMeta,
        strings: StringTable,
        events: Events,
        flows: Flows | None = None,
        memory: MemoryEvents | None = None,
        instants: Instants | None = None,
        extra_args: Mapping[int, Mapping[str, Any]] | None = None,
    ) -> None:
        self.meta = meta
        self.strings = strings
        self.events = events
        self.flows = flows if flows is not None else Flows.empty()
        self.memory = memory if memory is not None else MemoryEvents.empty()
        self.instants = instants if instants is not None else Instants.empty()
        self.extra_args: Mapping[int, Mapping[str, Any]] = extra_args or {}
        self._cache: dict[Any, Any] = {}

    def __repr__(self) -> str:
        return f"Trace(rank={self.rank}, events={len(self.events)}, flows={len(self.flows)}, path={self.meta.path!r})"

    @property
    def rank(self) -> int:
        return self.meta.rank

    def cat_id(self, name: str) -> int:
        """String id of a category-like string (e.g. flow cats "ac2g"); -1 when absent."""
        return self.strings.lookup(name)

    def events_of(self, *cats: Cat) -> Events:
        """Sub-table of the events in the given categories (cached; do not mutate)."""
        got = self._cache.get(("cats_as_given", cats))  # rules ask for the same few tables dozens of times
        if got is not None:
            return got
        codes = sorted({int(c) for c in cats})
        cat = self.events.cat
        if cat.dtype == np.int8:
            # categories with no event add no row: leave them out of the key, so e.g. (cpu_op, user_annotation,
            # python_function) is the (cpu_op, user_annotation) table of a trace without python functions
            counts = self._cache.get("cat_counts")
            if counts is None:
                counts = self._cache["cat_counts"] = np.bincount(cat.view(np.uint8), minlength=256).tolist()
            codes = [c for c in codes if not -256 <= c < 256 or counts[c & 255]]  # (-1 is row 255, as below)
        key = ("cats", tuple(codes))
        got = self._cache.get(key)
        if got is None:
            if cat.dtype == np.int8:  # a lookup by code: one gather (np.isin costs ~10x more on small tables)
                table = np.zeros(256, dtype=bool)
                table[list(key[1])] = True
                mask = table[cat.view(np.uint8)]
            else:
                mask = np.isin(cat, np.array(key[1], dtype=cat.dtype))
            got = self.events.take(mask)
            self._cache[key] = got
            self._cache.setdefault("cached_tables", set()).add(id(got))
        self._cache[("cats_as_given", cats)] = got
        return got

    def cached(self, key: Any, compute: Callable[[], Any]) -> Any:
        """Memoize a derived value on this trace (analyses share e.g. kernel classifications)."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def name_ids(self, events: Events) -> np.ndarray:
        """Sorted distinct name ids of ``events`` (cached for ``self.events`` and ``events_of`` tables)."""
        key = ("name_ids", id(events))
        hit = self._cache.get(key)
        if hit is not None and hit[0] is events:
            return hit[1]
        names = events.name
        if len(names) and names.min() < 0:
            names = names[names >= 0]
        ids = np.bincount(names, minlength=len(self.strings)).nonzero()[0] if len(names) else np.empty(0, np.int64)
        # only tables that live as long as the trace: caching a transient sub-table would pin its rows
        if events is self.events or id(events) in self._cache.get("cached_tables", ()):
            self._cache[key] = (events, ids)
        return ids

    def names_text(self, events: Events) -> str:
        """The distinct names of ``events`` joined by newlines (cached like ``name_ids``): one substring test
        tells whether any name of the table contains a literal, before a predicate runs name by name."""
        key = ("names_text", id(events))
        hit = self._cache.get(key)
        if hit is not None and hit[0] is events:
            return hit[1]
        strings = self.strings._strings
        text = "\n".join([strings[i] for i in self.name_ids(events).tolist()])
        if events is self.events or id(events) in self._cache.get("cached_tables", ()):
            self._cache[key] = (events, text)
        return text

    def name_mask(
        self, events: Events, predicate: Callable[[str], bool], needles: str | tuple[str, ...] = ()
    ) -> np.ndarray:
        """Boolean mask over ``events``: predicate(name); evaluated once per distinct name of ``events`` (not of
        the whole string table: args strings, categories and other tables' names are never tested), then
        vectorized. ``needles``: literals of which a name must contain at least one for the predicate to hold
        (e.g. "ProfilerStep" for ``^ProfilerStep#\\d+$``); when no name of the table contains any, the mask is
        all false without running the predicate (most rules look for names a small trace does not have)."""
        if needles:
            text = self.names_text(events)
            if not any(n in text for n in ((needles,) if isinstance(needles, str) else needles)):
                return np.zeros(len(events), dtype=bool)
        strings = self.strings._strings  # the list itself: no method call per name
        table = np.zeros(len(strings) + 1, dtype=bool)  # +1: a -1 id maps to the last slot (False)
        table[[i for i in self.name_ids(events).tolist() if predicate(strings[i])]] = True
        return table[events.name]

    def names(self, events: Events) -> list[str]:
        return [self.strings[i] for i in events.name]

    def name(self, row: int) -> str:
        return self.strings[self.events.name[row]]

    def arg_json(self, string_id: int) -> Any:
        """Decode a JSON-serialized arg column value (input_dims / input_types); None for -1."""
        if string_id < 0:
            return None
        return orjson.loads(self.strings[string_id])

    @property
    def has_gpu(self) -> bool:
        return bool(np.isin(self.events.cat, np.array(GPU_ACTIVITY_CATS, dtype=np.int8)).any())

    def gpu_devices(self) -> np.ndarray:
        """Distinct device ids with GPU activity (falls back to pid for rows without a device arg)."""
        g = self.events_of(*GPU_ACTIVITY_CATS)
        dev = np.where(g.device >= 0, g.device, g.pid)
        return np.unique(dev)

    @property
    def span(self) -> tuple[float, float]:
        """(first start, last end) over all complete events; (0, 0) when empty."""
        ev = self.events
        if not len(ev):
            return (0.0, 0.0)
        return (float(ev.ts.min()), float(ev.end.max()))

    @property
    def nbytes(self) -> int:
        """Approximate memory held by the arrays."""
        total = self.events.nbytes
        for part in (self.flows, self.memory, self.instants):
            total += sum(getattr(part, f.name).nbytes for f in fields(part))
        return total


@dataclass(frozen=True)
class LoadError:
    """Why one trace file could not be loaded."""

    path: str
    reason: str


@dataclass(frozen=True)
class MultiRankTrace:
    """The ranks of one job, ``{rank: Trace}`` ordered by rank, plus the files that failed to load."""

    traces: Mapping[int, Trace]
    errors: tuple[LoadError, ...] = ()

    @property
    def ranks(self) -> list[int]:
        return sorted(self.traces)

    def __iter__(self) -> Iterator[Trace]:
        return (self.traces[r] for r in self.ranks)

    def __len__(self) -> int:
        return len(self.traces)

    def __getitem__(self, rank: int) -> Trace:
        return self.traces[rank]

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

Modules: ``categories`` (``Cat`` and the category groups), ``strings`` (``StringTable``), ``events`` (``Events``),
``tables`` (``Flows``, ``MemoryEvents``, ``Instants``); this one holds ``Trace`` and its metadata and re-exports
the others, so ``from dyno.trace_analysis.model import X`` works for every name of the model.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import msgspec
import numpy as np
import orjson

from dyno.trace_analysis import categories
from dyno.trace_analysis.categories import *  # noqa: F403  (the model's names include every category name)
from dyno.trace_analysis.categories import GPU_ACTIVITY_CATS, Cat
from dyno.trace_analysis.events import EVENT_DTYPES, Events
from dyno.trace_analysis.strings import StringTable
from dyno.trace_analysis.tables import Flows, Instants, MemoryEvents

__all__ = [
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
__all__ += categories.__all__

logger = logging.getLogger(__name__)


class TraceMeta(msgspec.Struct, frozen=True):
    """Top-level metadata of one trace file."""

    path: str
    rank: int
    world_size: int | None = None
    rank_source: str = "default"  # "distributedInfo" | "filename" | "default" | "order" (see load_traces)
    distributed_info: Mapping[str, Any] = msgspec.field(default_factory=dict)
    device_properties: tuple[Mapping[str, Any], ...] = ()
    trace_id: str | None = None
    host_name: str | None = None
    base_time_ns: int | None = None
    schema_version: int | None = None
    display_time_unit: str | None = None
    float_timestamps: bool = False  # some ts were JSON floats (ns-resolution traces; HTA rounds these)
    process_names: Mapping[int, str] = msgspec.field(default_factory=dict)
    thread_names: Mapping[tuple[int, int], str] = msgspec.field(default_factory=dict)
    other: Mapping[str, Any] = msgspec.field(default_factory=dict)

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
            total += sum(getattr(part, f).nbytes for f in part.__struct_fields__)
        return total


class LoadError(msgspec.Struct, frozen=True):
    """Why one trace file could not be loaded."""

    path: str
    reason: str


class MultiRankTrace(msgspec.Struct, frozen=True):
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

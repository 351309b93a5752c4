"""Turn parsed batches of trace events into the columnar model (``TraceBuilder``), block by block.

Used by ``dyno.trace_analysis.loader``. Batches come as column buffers from the native decoder (``_native.c``,
when built: the common case), as ``Event`` structs from the typed decoder (``eventdecode``, read with C-level
``map``/``attrgetter`` passes) or as plain JSON values from orjson (the general path for anything the typed
decoder declines). All paths end in the same chunk code, and the tests check they give the same model. Each batch
becomes numpy column chunks right away (mostly-absent integer columns stored sparse), and ``build`` assembles the
sorted ``Trace`` one column at a time to bound peak memory.

Helpers live beside it: ``element_parsing`` (single elements parsed again), ``columns`` (JSON values -> numpy
values), ``interning`` (string-valued fields -> id columns), ``assembly`` (chunk storage and the sorted tables).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any, cast

import numpy as np

from dyno.trace_analysis.assembly import (
    assemble_events,
    assemble_flows,
    instants_table,
    memory_table,
    release_free_memory,
    sparsify,
)
from dyno.trace_analysis.columns import ARG_INT_COLUMNS, CAT_CODES, cat_code, float_column, int_column
from dyno.trace_analysis.element_parsing import parse_element, parse_elements
from dyno.trace_analysis.eventdecode import (
    EMPTY_ARGS,
    Event,
    NativeBatch,
    element_texts,
)
from dyno.trace_analysis.interning import Interner
from dyno.trace_analysis.model import (
    EXTRA_ARGS_CATS,
    FLOW_FINISH,
    FLOW_START,
    FLOW_STEP,
    Cat,
    StringTable,
    Trace,
    TraceMeta,
)
from dyno.trace_analysis.native_columns import complete_columns, flow_columns

__all__ = ["TraceBuilder", "release_free_memory"]

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
_SHAPE_KEYS = frozenset({"Input Dims", "Input type"})
_ARG_GETTERS = {
    col: attrgetter(col)
    for col in (*(c for c, _, _ in ARG_INT_COLUMNS), "input_dims", "input_types", "coll_name", "dtype")
}


def _args(e: dict[str, Any]) -> dict[str, Any]:
    """An event's args; anything but a JSON object (a list, a string) counts as no args."""
    a = e.get("args")
    return a if type(a) is dict else _EMPTY


def _gather(items: list[Any], rows: list[int]) -> list[Any]:
    """items[rows] as a list, gathered in C."""
    if len(rows) > 1:
        return list(itemgetter(*rows)(items))
    return [items[r] for r in rows]


class TraceBuilder:
    """Accumulates column chunks block by block, then assembles the Trace."""

    def __init__(self) -> None:
        self.strings = StringTable()
        self.interner = Interner(self.strings)
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
            cats = [cat_code(e.get("cat")) for e in xs]
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
            self._add_values([parse_element(texts[i]) for i in rest])
        if xs:
            ts, dur, cat, name, pid, tid, args = [list(map(get, xs)) for get in _X_FIELDS]
            try:
                codes: list[int | None] = list(map(CAT_CODES.get, cat))
            except TypeError:  # an unhashable category
                codes = [None]
            cats: list[int] = [cat_code(c) for c in cat] if None in codes else cast("list[int]", codes)
            extra = []
            for i in np.flatnonzero(_EXTRA_CAT_TABLE[np.array(cats, dtype=np.int8)]).tolist():
                if args[i] is not None:
                    # rare categories keep their whole args dict: parse just that element again
                    texts = texts or element_texts(batch)
                    a = parse_element(texts[x_rows[i]]).get("args")
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
            cats = np.array([cat_code(v) for v in c["x_cat_u"]], dtype=np.int8)[np.frombuffer(c["x_cat"], np.int32)]
            # rare categories keep their whole args: those events are parsed again, with the rest
            extra_rows = np.flatnonzero(_EXTRA_CAT_TABLE[cats] & (np.frombuffer(c["x_has_args"], dtype=np.uint8) != 0))
            x_rows = np.frombuffer(c["x_rows"], dtype=np.int64)
            again = [*rest.tolist(), *x_rows[extra_rows].tolist()]
        else:
            again = rest.tolist()
        # instants, [memory], metadata and the rare categories' events: one orjson call for all of them
        parsed = parse_elements(memoryview(batch), np.frombuffer(c["spans"], dtype=np.int64), again) if again else []
        if len(rest):
            self._add_values(parsed[: len(rest)])
        if n:
            self.float_ts = self.float_ts or c["x_float_ts"]
            extra = []
            for i, e in zip(extra_rows.tolist(), parsed[len(rest) :], strict=True):
                a = e.get("args")
                if a:
                    extra.append((i, a))
            cols = complete_columns(c, cats, self.interner)
            self._store_complete(cols, extra, n)
        if c["f_n"]:
            self.flow_chunks.append(flow_columns(c, self.interner))

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
            "ts": float_column(ts),
            "dur": float_column(dur),
            "cat": np.array(cats, dtype=np.int8),
            "name": np.array(self.interner.ids(names), dtype=np.int32),
            "pid": self.interner.proc_ids(pids),
            "tid": self.interner.proc_ids(tids),
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

        for col, key, dtype in ARG_INT_COLUMNS:
            vals = values(col, key)
            cols[col] = None if vals is None else int_column(vals, dtype)
        for col, key in (("input_dims", "Input Dims"), ("input_types", "Input type")):
            vals = values(col, key)
            if vals is None:
                cols[col] = None
            else:
                cols[col] = (
                    self.interner.raw_json_ids(vals) if typed else np.array(self.interner.json_ids(vals), np.int32)
                )
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
            sparsify(chunk)
        self.ev_chunks.append(chunk)
        self.n_events += n

    # -- assembly ----------------------------------------------------------------------------------
    def build(self, meta: TraceMeta) -> Trace:
        chunks, self.ev_chunks = self.ev_chunks, []
        events, extra = assemble_events(chunks, self.extra, meta.path)
        del chunks
        flows, self.flow_chunks = assemble_flows(self.flow_chunks), []
        memory = memory_table(self.memory, self.interner)
        instants = instants_table(self.instants, self.interner)
        return Trace(meta, self.strings, events, flows, memory, instants, extra)

    def _add_flows(self, ids: Any, ts: Any, pid: Any, tid: Any, ph: Any, cat: Any) -> None:
        """Flow events of one batch, one sequence per field; stored as arrays right away (Python tuples would
        cost ~200 bytes per flow until the end)."""
        self.flow_chunks.append(
            {
                "id": int_column(ids, np.int64),
                "ts": float_column(ts),
                "pid": self.interner.proc_ids(pid),
                "tid": self.interner.proc_ids(tid),
                "phase": np.array(list(map(_FLOW_PHASE.__getitem__, ph)), dtype=np.int8),
                "cat": np.array(self.interner.ids(cat), dtype=np.int32),
            }
        )

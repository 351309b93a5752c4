"""The smaller per-trace tables beside ``Events``: flow events (``Flows``), allocator ``[memory]`` events
(``MemoryEvents``) and other instant events (``Instants``). Part of the model (``dyno.trace_analysis.model``
re-exports them)."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

import msgspec
import numpy as np

from dyno.trace_analysis.categories import FLOW_FINISH, FLOW_START

__all__ = ["Flows", "MemoryEvents", "Instants"]

_T = TypeVar("_T", bound="_Table")


class _Table:
    """Equal-length numpy columns; DTYPES gives each column's dtype, so `empty()` needs no list of its own."""

    __slots__ = ()  # the Struct subclasses' instances hold their fields only (no __dict__)
    # Set unannotated in each subclass, so that msgspec does not list it among the fields.
    DTYPES: ClassVar[dict[str, Any]]
    __struct_fields__: ClassVar[tuple[str, ...]]  # the subclass's field names (msgspec.Struct)
    ts: np.ndarray

    def __len__(self) -> int:
        return int(self.ts.shape[0])

    def take(self: _T, rows: np.ndarray) -> _T:
        """The same table with only `rows` (an index array or mask), in that order."""
        return type(self)(**{f: getattr(self, f)[rows] for f in self.__struct_fields__})

    @classmethod
    def empty(cls: type[_T]) -> _T:
        return cls(**{f: np.empty(0, cls.DTYPES[f]) for f in cls.__struct_fields__})


class Flows(_Table, msgspec.Struct, frozen=True, eq=False):
    """Flow events (ph s / f / t), sorted by ts. ``cat`` is a string id ("ac2g", "fwdbwd", ...)."""

    DTYPES = dict(id=np.int64, ts=np.float64, pid=np.int64, tid=np.int64, phase=np.int8, cat=np.int32)

    id: np.ndarray  # int64
    ts: np.ndarray  # float64
    pid: np.ndarray  # int64
    tid: np.ndarray  # int64
    phase: np.ndarray  # int8: FLOW_START / FLOW_FINISH / FLOW_STEP
    cat: np.ndarray  # int32 string id

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


class MemoryEvents(_Table, msgspec.Struct, frozen=True, eq=False):
    """``[memory]`` instant events from the caching allocator (profile_memory=True), sorted by ts."""

    DTYPES = dict(
        ts=np.float64,
        pid=np.int64,
        tid=np.int64,
        bytes=np.int64,
        total_allocated=np.int64,
        total_reserved=np.int64,
        device_type=np.int8,
        device_id=np.int16,
    )

    ts: np.ndarray  # float64
    pid: np.ndarray  # int64
    tid: np.ndarray  # int64
    bytes: np.ndarray  # int64, signed: + allocation, - free
    total_allocated: np.ndarray  # int64, -1 absent
    total_reserved: np.ndarray  # int64, -1 absent
    device_type: np.ndarray  # int8 (Kineto: 0 = CPU, 1 = CUDA)
    device_id: np.ndarray  # int16


class Instants(_Table, msgspec.Struct, frozen=True, eq=False):
    """Other instant events (ph i / I), sorted by ts."""

    DTYPES = dict(ts=np.float64, name=np.int32, pid=np.int64, tid=np.int64)

    ts: np.ndarray  # float64
    name: np.ndarray  # int32 string id
    pid: np.ndarray  # int64
    tid: np.ndarray  # int64

"""The smaller per-trace tables beside ``Events``: flow events (``Flows``), allocator ``[memory]`` events
(``MemoryEvents``) and other instant events (``Instants``). Part of the model (``dyno.trace_analysis.model``
re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dyno.trace_analysis.categories import FLOW_FINISH, FLOW_START

__all__ = ["Flows", "MemoryEvents", "Instants"]


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

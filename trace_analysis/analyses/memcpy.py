"""Memory copies and sets by kind (HtoD, DtoH, DtoD, ..., with pageable/pinned memory) and their bandwidth.

Kind and memory come from Kineto's names, e.g. ``Memcpy HtoD (Pageable -> Device)``; bandwidth = bytes / time.
Pageable host memory forces a staged, synchronous-to-the-host copy: ``pageable`` flags those.
"""

from __future__ import annotations

import re

import msgspec
import numpy as np

from dyno.trace_analysis.analyses.arrays import unique_inverse
from dyno.trace_analysis.analyses.gpu import gpu_scope
from dyno.trace_analysis.model import Cat, Trace

__all__ = ["CopyKind", "MemoryCopies", "memory_copies"]

_NAME_RX = re.compile(r"^(Memcpy|Memset)\s*(\w+)?\s*(?:\((.*)\))?")


class CopyKind(msgspec.Struct, frozen=True):
    name: str  # the Kineto name, e.g. "Memcpy HtoD (Pageable -> Device)"
    op: str  # "Memcpy" | "Memset"
    direction: str  # "HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "Device", ...
    memory: str  # "Pageable -> Device", ... ("" when absent)
    pageable: bool
    count: int
    total_bytes: int
    total_us: float
    bandwidth_gbps: float  # total bytes / total time
    example_ts: float


class MemoryCopies(msgspec.Struct, frozen=True):
    rank: int
    kinds: tuple[CopyKind, ...]  # sorted by total time, descending

    @property
    def total_us(self) -> float:
        return sum(k.total_us for k in self.kinds)

    @property
    def pageable_count(self) -> int:
        return sum(k.count for k in self.kinds if k.pageable)


def memory_copies(trace: Trace, *, include_last_step: bool = False) -> MemoryCopies:
    """Copies and sets by kind (see the module docstring). Cached on the trace."""
    return trace.cached(("memory_copies", include_last_step), lambda: _memory_copies(trace, include_last_step))


def _memory_copies(trace: Trace, include_last_step: bool) -> MemoryCopies:
    scope = gpu_scope(trace, include_last_step)
    act = scope.activity
    ev = act.take((act.cat == Cat.GPU_MEMCPY.value) | (act.cat == Cat.GPU_MEMSET.value))
    kinds = []
    if len(ev):
        ids, inv = unique_inverse(ev.name)
        count = np.bincount(inv, minlength=len(ids))
        tot = np.bincount(inv, weights=ev.dur, minlength=len(ids))
        nbytes = np.bincount(inv, weights=np.maximum(ev.bytes, 0).astype(np.float64), minlength=len(ids))
        # first row of each kind: group j starts at sum(count[:j]) in the stable order (every group is non-empty)
        first_row = inv.argsort(kind="stable")[count.cumsum() - count]
        for j, sid in enumerate(ids):
            name = trace.strings[sid]
            m = _NAME_RX.match(name)
            op = m.group(1) if m else "Memcpy"
            direction = ((m.group(2) or "") if m else "") or op
            memory = (m.group(3) or "") if m else ""
            kinds.append(
                CopyKind(
                    name=name,
                    op=op,
                    direction=direction,
                    memory=memory,
                    pageable="pageable" in name.lower(),
                    count=int(count[j]),
                    total_bytes=int(nbytes[j]),
                    total_us=float(tot[j]),
                    bandwidth_gbps=float(nbytes[j] / tot[j] / 1e3) if tot[j] > 0 else 0.0,
                    example_ts=float(ev.ts[first_row[j]]),
                )
            )
        kinds.sort(key=lambda k: -k.total_us)
    return MemoryCopies(trace.rank, tuple(kinds))

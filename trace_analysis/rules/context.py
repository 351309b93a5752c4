"""The view of one rank that rules read: the trace model plus per-kind event tables, steps and the window.

Built once per rank and shared by every rule. Name predicates run once per distinct name (``Trace.name_mask``),
so every rule stays vectorized over the model's numpy columns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import cached_property

import msgspec
import numpy as np

from ..analyses.arrays import distinct, flatnonzero
from ..analyses.gpu import device_of, launch_rows
from ..analyses.intervals import merge
from ..model import GPU_ACTIVITY_CATS, Cat, Events, Trace
from .base import Example, count_of

__all__ = ["RuleContext", "StepWindow"]

_STEP_RX = re.compile(r"^ProfilerStep#\d+$")


class StepWindow(msgspec.Struct, frozen=True):
    name: str
    ts: float
    dur: float


class RuleContext:
    """One rank, as rules see it. Tables are sub-tables of ``trace.events`` (sorted by ts, cached)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    # ---- identity -------------------------------------------------------------------------------------------
    @property
    def rank(self) -> int:
        return self.trace.rank

    @property
    def source(self) -> str:
        return self.trace.meta.path

    # ---- event tables ---------------------------------------------------------------------------------------
    @cached_property
    def cpu_ops(self) -> Events:
        """Host-side ops and annotations (cpu_op, user_annotation, python_function)."""
        return self.trace.events_of(Cat.CPU_OP, Cat.USER_ANNOTATION, Cat.PYTHON_FUNCTION)

    @cached_property
    def runtime(self) -> Events:
        return self.trace.events_of(Cat.CUDA_RUNTIME, Cat.CUDA_DRIVER)

    @cached_property
    def kernels(self) -> Events:
        return self.trace.events_of(Cat.KERNEL)

    @cached_property
    def memcpy(self) -> Events:
        return self.trace.events_of(Cat.GPU_MEMCPY)

    @cached_property
    def gpu_activity(self) -> Events:
        return self.trace.events_of(*GPU_ACTIVITY_CATS)

    @cached_property
    def memcpy_launch(self) -> np.ndarray:
        """Per memcpy row: the row in ``trace.events`` of its launching runtime call, or -1."""
        return launch_rows(self.trace, self.memcpy)

    @cached_property
    def pageable_memcpy(self) -> np.ndarray:
        """Mask over ``memcpy``: copies from or to pageable host memory (Kineto names them "... (Pageable -> ...)").
        Read-only: pageable-memcpy, sync-calls and slow-runtime-calls all ask."""
        mc = self.memcpy
        mask = self.mask(mc, lambda n: "Pageable" in n, "Pageable")
        mask.setflags(write=False)
        return mask

    @cached_property
    def gpu_sync(self) -> Events:
        return self.trace.events_of(Cat.CUDA_SYNC)

    @property
    def has_gpu(self) -> bool:
        return len(self.gpu_activity) > 0

    # ---- names ----------------------------------------------------------------------------------------------
    def mask(self, events: Events, pred: Callable[[str], bool], needles: str | tuple[str, ...] = ()) -> np.ndarray:
        """``pred`` per row's name; ``needles``: literals a matching name must contain one of (``Trace.name_mask``)."""
        if not len(events):
            return np.zeros(0, bool)
        return self.trace.name_mask(events, pred, needles)

    def names_in(self, events: Events, names: Iterable[str]) -> np.ndarray:
        # exact names: look their ids up instead of testing every name of the table
        table = np.zeros(len(self.trace.strings) + 1, dtype=bool)
        table[[i for i in map(self.trace.strings.lookup, frozenset(names)) if i >= 0]] = True
        return table[events.name]

    def name_of(self, events: Events, i: int) -> str:
        return self.trace.strings[int(events.name[i])]

    def examples(self, events: Events, rows: np.ndarray, limit: int = 3, where: str = "tid") -> list[Example]:
        """Examples for the first ``limit`` of ``rows`` (positions in ``events``), in the given order."""
        out = []
        # each column read once: on a large table every read is a fresh array (so no identity test between reads)
        stream = events.stream if where == "stream" else None
        tid, pid, ts, dur = events.tid, events.pid, events.ts, events.dur
        for i in np.asarray(rows)[:limit]:
            i = int(i)
            if stream is not None and stream[i] >= 0:
                label = f"stream {int(stream[i])}"
            else:
                label = f"tid {int(tid[i])}"
            if pid[i] >= 0:
                label = f"pid {int(pid[i])} {label}"
            out.append(Example(self.name_of(events, i), float(ts[i]), float(dur[i]), label))
        return out

    def longest_examples(self, events: Events, rows: np.ndarray, limit: int = 3, where: str = "tid") -> list[Example]:
        """Examples for the longest of ``rows`` (positions in ``events``), longest first."""
        rows = np.asarray(rows)
        return self.examples(events, rows[(-events.dur[rows]).argsort(kind="stable")], limit=limit, where=where)

    # ---- steps and window -----------------------------------------------------------------------------------
    @cached_property
    def steps(self) -> tuple[StepWindow, ...]:
        ann = self.cpu_ops
        m = self.mask(ann, lambda n: _STEP_RX.match(n) is not None, "ProfilerStep#")
        rows = flatnonzero(m)
        return tuple(StepWindow(self.name_of(ann, int(i)), float(ann.ts[i]), float(ann.dur[i])) for i in rows)

    @cached_property
    def span(self) -> tuple[float, float]:
        return self.trace.span

    @cached_property
    def window(self) -> tuple[float, float]:
        """The analysed window: first step start to last step end when steps exist, else the trace span."""
        if self.steps:
            return self.steps[0].ts, max(s.ts + s.dur for s in self.steps)
        return self.span

    @property
    def window_us(self) -> float:
        lo, hi = self.window
        return max(hi - lo, 0.0)

    @property
    def window_kind(self) -> str:
        """The JSON report's ``window.kind``: "N profiler steps" (also for one: a documented value tools may
        parse) or "trace span". Text says ``window_name``."""
        return f"{len(self.steps)} profiler steps" if self.steps else "trace span"

    @property
    def window_name(self) -> str:
        """The window in words, for titles and the text/HTML report: "1 profiler step", "5 profiler steps"."""
        return count_of(len(self.steps), "profiler step") if self.steps else "trace span"

    def in_window(self, events: Events) -> np.ndarray:
        lo, hi = self.window
        return (events.ts >= lo) & (events.ts < hi)

    def share(self, time_us: float) -> float | None:
        w = self.window_us
        return time_us / w if w > 0 else None

    @cached_property
    def gpu_span(self) -> tuple[float, float] | None:
        g = self.gpu_activity
        if not len(g):
            return None
        return float(g.ts.min()), float(g.end.max())

    @cached_property
    def device_busy(self) -> dict[int, tuple[np.ndarray, np.ndarray, float, float]]:
        """Per GPU device (sorted): the union of its activity as disjoint sorted (starts, ends), and its first
        start and last end. Shared by the utilization timeline, the starvation rule and the report."""
        g = self.gpu_activity
        out: dict[int, tuple[np.ndarray, np.ndarray, float, float]] = {}
        if not len(g):
            return out
        dev = self.gpu_device_of(g)
        ts, end = g.ts, g.end
        for d in distinct(dev).tolist():
            sel = dev == d
            d_ts, d_end = ts[sel], end[sel]
            s, e = merge(d_ts, d_end)
            out[int(d)] = (s, e, float(d_ts.min()), float(d_end.max()))
        return out

    @cached_property
    def first_gpu_device(self) -> int:
        """``gpu_device_of(gpu_activity)[0]`` (the device of the first GPU row) without the whole column."""
        g = self.gpu_activity
        d = int(g.device[0])
        return d if d >= 0 else int(g.pid[0])

    def gpu_device_of(self, events: Events) -> np.ndarray:
        """Device of GPU rows (args.device, else pid as Kineto writes it: ``analyses.gpu.device_of``)."""
        return device_of(events)

    # ---- metadata -------------------------------------------------------------------------------------------
    @cached_property
    def record_shapes(self) -> bool:
        other = self.trace.meta.other
        if other.get("record_shapes") is not None:
            return bool(other.get("record_shapes"))
        return bool((self.cpu_ops.input_dims >= 0).any())

    def device_capability(self, device: int) -> tuple[int, int] | None:
        p = self.trace.meta.device_property(device)
        if p is None and self.trace.meta.device_properties:
            p = self.trace.meta.device_properties[0]
        if not p or "computeMajor" not in p:
            return None
        major, minor = _as_int(p.get("computeMajor")), _as_int(p.get("computeMinor", 0))
        return None if major is None or minor is None else (major, minor)

    def device_memory(self, device: int) -> int | None:
        p = self.trace.meta.device_property(device)
        if p is None or not p.get("totalGlobalMem"):
            return None
        return _as_int(p["totalGlobalMem"])


def _as_int(value: object) -> int | None:
    """A deviceProperties number, or None when the trace holds something else (unknown, not a rule error)."""
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        return None


def contained_in(child_ts: np.ndarray, child_tid: np.ndarray, parent: Events, parent_rows: np.ndarray) -> np.ndarray:
    """For each child (ts, tid), the position in ``parent_rows`` of a parent on the same thread whose
    [ts, end] contains it, else -1. Parents on one thread must not overlap each other (true for e.g. step
    windows, optimizer spans, DataLoader __next__)."""
    out = np.full(child_ts.shape[0], -1, np.int64)
    if not parent_rows.shape[0] or not child_ts.shape[0]:
        return out
    p_tid = parent.tid[parent_rows]
    for tid in distinct(p_tid):  # one numpy pass per thread that owns parents (a handful)
        sel = flatnonzero(p_tid == tid)
        ps = parent.ts[parent_rows[sel]]
        pe = ps + parent.dur[parent_rows[sel]]
        order = ps.argsort(kind="stable")
        ps, pe, sel = ps[order], pe[order], sel[order]
        cs = flatnonzero(child_tid == tid)
        pos = ps.searchsorted(child_ts[cs], side="right") - 1
        ok = pos >= 0
        ok[ok] = child_ts[cs[ok]] <= pe[pos[ok]]
        out[cs[ok]] = sel[pos[ok]]
    return out

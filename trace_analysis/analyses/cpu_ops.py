"""CPU operators: top-N by total (inclusive) and self (exclusive) time; the main view for CPU-only traces.

Self time = an op's duration minus the durations of its direct child ops on the same thread (nesting from
timestamps, as the PyTorch profiler's "Self CPU" does; runtime calls made by the op stay in its self time).
A call nested directly in a call of the same name counts as part of it (calls and total time), as in torch's
``key_averages``.
"""

from __future__ import annotations

import msgspec
import numpy as np

from dyno.trace_analysis.analyses.arrays import INT16_MAX, flatnonzero
from dyno.trace_analysis.analyses.kernels import group_rows_by_name
from dyno.trace_analysis.model import Cat, Events, Trace

__all__ = ["OpStat", "CpuOpSummary", "cpu_op_summary", "op_parents", "self_times", "parents"]


class OpStat(msgspec.Struct, frozen=True):
    name: str
    count: int
    total_us: float
    self_us: float
    mean_us: float
    max_us: float
    example_ts: float  # start of the longest call


class CpuOpSummary(msgspec.Struct, frozen=True):
    rank: int
    n_ops: int
    wall_us: float  # union of top-level op time
    by_total: tuple[OpStat, ...]
    by_self: tuple[OpStat, ...]


def parents(ev: Events) -> np.ndarray:
    """Row of the innermost enclosing event on the same (pid, tid), or -1; vectorized per thread.

    Assumes properly nested intervals per thread (true for profiler op events)."""
    n = len(ev)
    parent = np.full(n, -1, dtype=np.int64)
    if not n:
        return parent
    # sort by thread, start, longer first (a parent precedes its children)
    order = _thread_time_order(ev)
    pid, tid, ts, end = ev.pid[order], ev.tid[order], ev.ts[order], (ev.ts + ev.dur)[order]
    bounds = flatnonzero((pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])) + 1  # np.diff(x) != 0 on ints
    starts = np.concatenate(([0], bounds))
    stops = np.concatenate((bounds, [n]))
    for a, b in zip(starts, stops, strict=True):
        s, e = ts[a:b], end[a:b]
        m = b - a
        # depth = number of earlier events still open at s_i = i - #{j < i: e_j <= s_i}. Rows j >= i with
        # e_j <= s_i are zero-length rows starting at s_i (sorted last among equal starts): subtract them.
        idx = np.arange(m)
        e_sorted = e.copy()  # np.sort(e), without its Python wrapper
        e_sorted.sort()
        closed = e_sorted.searchsorted(s, side="right")
        zero = np.concatenate(([0], (e <= s).cumsum()))  # e <= s only for zero-length rows
        lo, hi = _equal_runs(s)
        z = hi - (zero[hi] - zero[lo])  # first zero-length row among those starting at s_i
        closed -= hi - np.maximum(idx, z)
        depth = np.maximum(idx - closed, 0)
        # parent = last earlier event with depth d-1
        key = depth.astype(np.int64, copy=False) * (m + 1) + idx
        # key order = depth order, stable (idx ascends); as int16 numpy sorts stably by radix (depth < m)
        korder = (depth.astype(np.int16) if m <= INT16_MAX else key).argsort(kind="stable")
        ksorted = key[korder]
        want = (depth - 1) * (m + 1) + idx
        pos = ksorted.searchsorted(want, side="left") - 1
        ok = (depth > 0) & (pos >= 0)
        cand = np.where(ok, korder[np.maximum(pos, 0)], -1)
        ok &= np.where(cand >= 0, depth[np.maximum(cand, 0)] == depth - 1, False)
        parent[order[a:b][ok]] = order[a:b][cand[ok]]
    return parent


def _thread_time_order(ev: Events) -> np.ndarray:
    """``np.lexsort((-ev.dur, ev.ts, ev.tid, ev.pid))`` (by thread, start, longest first; ties by row) without
    sorting every row by duration: tables are sorted by ts already and have few threads, so the three stable
    sorts by ts, tid and pid run over presorted data; only rows that tie on (pid, tid, ts) are then ordered by
    duration."""
    ts, dur, tid, pid = ev.ts, ev.dur, ev.tid, ev.pid
    if np.isnan(ts).any():  # NaN starts: keep lexsort's own ordering of them
        return np.lexsort((-dur, ts, tid, pid))
    order = ts.argsort(kind="stable")
    order = order[tid[order].argsort(kind="stable")]
    order = order[pid[order].argsort(kind="stable")]
    p, t, s = pid[order], tid[order], ts[order]
    same = (p[1:] == p[:-1]) & (t[1:] == t[:-1]) & (s[1:] == s[:-1])  # row k+1 ties with row k
    if same.any():
        tied = np.zeros(order.shape[0], dtype=bool)
        tied[1:] = same
        tied[:-1] |= same
        run = (~np.concatenate(([False], same))).cumsum()  # run of equal (pid, tid, ts) per position
        pos = flatnonzero(tied)
        rows = order[pos]
        order[pos] = rows[np.lexsort((-dur[rows], run[pos]))]
    return order


def _equal_runs(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For sorted ``s``: (searchsorted(s, s, "left"), searchsorted(s, s, "right")), i.e. the bounds of each value's
    run of equal values, from the run boundaries in O(n) (NaNs: the binary searches)."""
    m = s.shape[0]
    if not m or np.isnan(s[-1]):
        return s.searchsorted(s, side="left"), s.searchsorted(s, side="right")
    new = np.empty(m, dtype=bool)
    new[0] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    first = flatnonzero(new)
    run = new.cumsum() - 1
    return first[run], np.concatenate((first[1:], [m]))[run]  # np.append(first[1:], m)


def op_parents(trace: Trace) -> np.ndarray:
    """``parents`` of the CPU ops (``trace.events_of(Cat.CPU_OP)``), cached and read-only: the op summary and the
    rules that look at top-level ops (the ones Python called) ask."""

    def compute() -> np.ndarray:
        par = parents(trace.events_of(Cat.CPU_OP))
        par.setflags(write=False)
        return par

    got: np.ndarray = trace.cached("cpu_op_parents", compute)
    return got


def self_times(ev: Events, par: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(self time per row, parent row per row); ``par``: ``parents(ev)`` when already known."""
    if par is None:
        par = parents(ev)
    child_sum = np.bincount(par[par >= 0], weights=ev.dur[par >= 0], minlength=len(ev))
    return np.maximum(ev.dur - child_sum, 0.0), par


def cpu_op_summary(trace: Trace, *, top_n: int = 20) -> CpuOpSummary:
    """Top-``top_n`` CPU ops by total and by self time. The per-name grouping (and the nesting it needs) is
    cached on the trace; only the ``top_n`` rows are built per call."""
    g = trace.cached("cpu_op_groups", lambda: _OpGroups.of(trace))
    if g is None:
        return CpuOpSummary(trace.rank, 0, 0.0, (), ())

    def stat(j: int) -> OpStat:
        got = g.built.get(j)  # one OpStat per group, shared by both tables and every top_n
        if got is None:
            total, count = g.total[j], g.count[j]
            got = g.built[j] = OpStat(
                name=trace.strings[g.ids[j]],
                count=count,
                total_us=total,
                self_us=g.self_by[j],
                mean_us=total / count,  # float / int: numpy's float64 division, same value
                max_us=g.maxs[j],
                example_ts=g.example_ts[j],
            )
        return got

    by_total = tuple(stat(j) for j in g.by_total[:top_n])
    by_self = tuple(stat(j) for j in g.by_self[:top_n])
    return CpuOpSummary(trace.rank, g.n_ops, g.wall, by_total, by_self)


class _OpGroups(msgspec.Struct, frozen=True, eq=False):
    """Per distinct cpu_op name: what ``cpu_op_summary`` reads for any ``top_n``. Python lists (``tolist()``):
    the OpStats are built from Python numbers, not one numpy scalar conversion per field."""

    n_ops: int
    wall: float
    ids: list[int]
    count: list[int]
    total: list[float]
    self_by: list[float]
    maxs: list[float]
    example_ts: list[float]  # start of each group's longest call
    by_total: list[int]  # group order by total time, descending (stable)
    by_self: list[int]
    built: dict[int, OpStat] = msgspec.field(default_factory=dict)

    @classmethod
    def of(cls, trace: Trace) -> _OpGroups | None:
        ev = trace.events_of(Cat.CPU_OP)
        if not len(ev):
            return None
        self_us, par = self_times(ev, op_parents(trace))
        # A call nested directly in a call of the same name is a dispatcher redispatch (aten::mean in aten::mean)
        # and part of that call, as torch's key_averages merges it: counted again, it doubled the op's calls and
        # inclusive time. Its self time stays the op's (the two self times add up to the merged call's).
        redispatch = np.zeros(len(ev), dtype=bool)
        nested = flatnonzero(par >= 0)
        redispatch[nested] = ev.name[par[nested]] == ev.name[nested]
        calls = flatnonzero(~redispatch)
        ids, _inv, count, total, _mins, maxs, longest = group_rows_by_name(ev.name[calls], ev.dur[calls])
        # a redispatch has its parent's name, so ``ids`` (sorted) holds every row's name
        self_by = np.bincount(ids.searchsorted(ev.name), weights=self_us, minlength=len(ids))
        wall = float(ev.dur[par < 0].sum())
        by_total = (-total).argsort(kind="stable")
        by_self = (-self_by).argsort(kind="stable")
        return cls(
            len(ev),
            wall,
            ids.tolist(),
            count.tolist(),
            total.tolist(),
            self_by.tolist(),
            maxs.tolist(),
            ev.ts[calls[longest]].tolist(),
            by_total.tolist(),
            by_self.tolist(),
        )

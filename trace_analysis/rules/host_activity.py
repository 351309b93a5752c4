"""What the host did while the GPU waited: a note for the examples of GPU idle gaps.

A gap example ("GPU idle gap at +31.367 s dur 10.03 s") only says where to look; the trace already holds the
answer. For a gap [lo, hi] this takes the thread that launched the GPU work ending the gap (the thread the GPU
was waiting for), the host events of that thread overlapping the gap (ops, annotations, Python frames, runtime
calls; ``ProfilerStep#N`` frames left out), and charges each instant of the gap to the innermost of them (self
time inside the gap, as the profiler's self time). The names with the most of it, and the part no profiled event
covers (Python code without ``with_stack``, I/O, sleeping), make the note:
"host tid 2869224: cudaFree 6.53 s (65%, 2 calls), cudaLaunchKernel 3.06 s (30%)".
"""

from __future__ import annotations

import msgspec
import numpy as np

from ..analyses.arrays import distinct, flatnonzero
from ..analyses.cpu_ops import parents
from ..analyses.gpu import launch_rows, profiler_steps
from ..analyses.intervals import union_length
from ..model import Cat, Events
from ..units import clip_name, fmt_us
from .context import RuleContext

__all__ = ["gap_note"]

_HOST_CATS = (Cat.CPU_OP, Cat.USER_ANNOTATION, Cat.PYTHON_FUNCTION, Cat.CUDA_RUNTIME, Cat.CUDA_DRIVER)
_MIN_PART = 0.05  # a name below 5% of the gap is not worth a place in the note
_MAX_NAMES = 3
_NAME_CHARS = 60
_LOOKAHEAD = 256  # GPU rows after a gap searched first for the one ending it (on its stream / device)
_LOOP_ROWS = 128  # up to this many events in a gap the nesting is a plain loop (cheaper than the numpy pass)


class _Host(msgspec.Struct, frozen=True, eq=False):
    """Which rows of ``trace.events`` are host-side (by category code; ``ProfilerStep#N`` frames by name id left
    out) and the longest of them: a gap's host rows start at most that long before it. Read on the full table's
    own columns, a slice per gap: a host sub-table would gather every column of it once per rank."""

    is_host_cat: np.ndarray  # by category code
    is_step_name: np.ndarray  # by name id (+1 for the -1 id)
    longest: float


def _host(ctx: RuleContext) -> _Host:
    def compute() -> _Host:
        cats = np.zeros(256, dtype=bool)
        cats[[c.value for c in _HOST_CATS]] = True
        steps = np.zeros(len(ctx.trace.strings) + 1, dtype=bool)
        steps[profiler_steps(ctx.trace).name] = True
        # the tables other rules read already (their columns are kept); a step frame spans every gap: counted, it
        # would widen every slice to the whole trace
        ops, runtime = ctx.cpu_ops, ctx.runtime
        longest = max(
            float(ops.dur[~steps[ops.name]].max(initial=0.0)) if len(ops) else 0.0,
            float(runtime.dur.max()) if len(runtime) else 0.0,
        )
        return _Host(cats, steps, longest)

    got: _Host = ctx.trace.cached(("rules.host_activity",), compute)
    return got


def _launching_tid(ctx: RuleContext, t: float, stream: int | None, device: int | None) -> int | None:
    """The thread of the launch call of the GPU row that ends the gap: the first row of ``ctx.gpu_activity`` (every
    GPU row, what the gaps are made of; sorted by start) starting at or after ``t``, on ``stream`` / ``device``
    when given. That row is almost always among the next few, but a burst on other streams or devices can come
    first (a gap cut at the window's end: the rows launched before the end and run after it); then the rest is
    searched, and no row means no thread (rather than another stream's launcher)."""
    g = ctx.gpu_activity
    n = len(g)
    k = int(g.ts.searchsorted(t, side="left"))
    if stream is not None or device is not None:
        found = -1
        for a, b in ((k, min(k + _LOOKAHEAD, n)), (min(k + _LOOKAHEAD, n), n)):
            ok = np.ones(b - a, dtype=bool)
            if stream is not None:
                ok &= g.stream[a:b] == stream
            if device is not None:
                dev = g.device[a:b]
                ok &= np.where(dev >= 0, dev, g.pid[a:b]) == device  # ``RuleContext.gpu_device_of``
            on = flatnonzero(ok)
            if on.shape[0]:
                found = a + int(on[0])
                break
        k = found if found >= 0 else n
    if k >= n:
        return None
    launch = int(launch_rows(ctx.trace, g.take(np.array([k])))[0])
    return None if launch < 0 else int(ctx.trace.events.tid[launch])


def _own_time(ev: Events, rows: np.ndarray, clipped: np.ndarray) -> tuple[np.ndarray, float]:
    """Per row of ``ev`` in ``rows`` (one thread's events overlapping the gap, sorted by ts): its time in the gap
    not inside a nested event (self time), and the time covered by any of them (the outermost ones' total)."""
    if rows.shape[0] > _LOOP_ROWS:
        par = parents(ev.take(rows))
        child = flatnonzero(par >= 0)
        inner = np.bincount(par[child], weights=clipped[child], minlength=rows.shape[0])
        return np.maximum(clipped - inner, 0.0), float(clipped[par < 0].sum())
    ts = ev.ts[rows]
    end = ts + ev.dur[rows]
    order = np.lexsort((-end, ts)).tolist()  # a parent before its children
    ts_l, end_l, clip_l = ts.tolist(), end.tolist(), clipped.tolist()
    own = list(clip_l)
    covered = 0.0
    stack: list[int] = []
    for i in order:
        while stack and end_l[stack[-1]] <= ts_l[i]:
            stack.pop()
        if stack:
            own[stack[-1]] -= clip_l[i]
        else:
            covered += clip_l[i]
        stack.append(i)
    return np.maximum(np.asarray(own), 0.0), covered


def _thread_note(ctx: RuleContext, rows: np.ndarray, lo: float, hi: float) -> tuple[str, float]:
    """The note's words for one thread's host rows overlapping [lo, hi] (sorted by ts), and the part of the gap
    no profiled event of that thread covers."""
    ev = ctx.trace.events
    width = hi - lo
    parts: list[tuple[float, str, int]] = []
    covered = 0.0
    if rows.shape[0]:
        ts = ev.ts[rows]
        clipped = np.minimum(ts + ev.dur[rows], hi) - np.maximum(ts, lo)
        own, covered = _own_time(ev, rows, clipped)
        # group by name id with a sort of these few rows (unique_inverse's bincount spans every id of the trace)
        names = ev.name[rows]
        order = names.argsort(kind="stable")
        sorted_names = names[order]
        head = np.ones(sorted_names.shape[0], dtype=bool)
        head[1:] = sorted_names[1:] != sorted_names[:-1]
        inv = np.empty_like(order)
        inv[order] = head.cumsum() - 1
        uniq = sorted_names[head]
        per_name = np.bincount(inv, weights=own, minlength=uniq.shape[0])
        calls = np.bincount(inv, minlength=uniq.shape[0])
        for j in flatnonzero(per_name >= _MIN_PART * width).tolist():
            name = ctx.trace.strings[int(uniq[j])] if uniq[j] >= 0 else "?"
            parts.append((float(per_name[j]), name, int(calls[j])))
    untraced = width - covered
    if untraced >= _MIN_PART * width:
        parts.append((untraced, "", 0))
    parts.sort(key=lambda p: -p[0])
    words = []
    for us, name, n in parts[:_MAX_NAMES]:
        share = f"{us / width:.0%}"
        if not name:
            words.append(f"no profiled event {fmt_us(us)} ({share})")
        else:
            words.append(f"{clip_name(name, _NAME_CHARS)} {fmt_us(us)} ({share}{f', {n} calls' if n > 1 else ''})")
    return ", ".join(words), untraced


def gap_note(
    ctx: RuleContext, lo: float, hi: float, stream: int | None = None, device: int | None = None
) -> str | None:
    """What the launching host thread did during the GPU idle gap [lo, hi] (module docstring), or None when the
    thread is unknown (no launch call for the GPU work after the gap) or the gap is empty.

    When that thread has no profiled event for most of the gap (e.g. the autograd thread waiting for the main
    thread to start backward), the thread whose events cover most of the gap is named too: it is what the launch
    waited for ("...; busiest tid 4037: Optimizer.step#Shampoo.step 43.5 ms (77%)")."""
    width = hi - lo
    if width <= 0:
        return None
    tid = _launching_tid(ctx, hi, stream, device)
    if tid is None:
        return None
    host = _host(ctx)
    ev = ctx.trace.events  # the full table: its columns are plain arrays, sliced here without a gather
    ts_all = ev.ts
    a = int(ts_all.searchsorted(lo - host.longest, side="left"))
    b = int(ts_all.searchsorted(hi, side="left"))
    ts, name = ts_all[a:b], ev.name[a:b]
    end = ts + ev.dur[a:b]
    tids = ev.tid[a:b]
    overlapping = host.is_host_cat[ev.cat[a:b]] & (end > lo) & ~host.is_step_name[name]
    words, untraced = _thread_note(ctx, a + flatnonzero(overlapping & (tids == tid)), lo, hi)
    note = f"host tid {tid}: {words}"
    if untraced >= 0.5 * width:
        best, best_cover = None, width - untraced
        for other in distinct(tids[overlapping]).tolist():
            if other == tid:
                continue
            sel = overlapping & (tids == other)
            cover = union_length(np.maximum(ts[sel], lo), np.minimum(end[sel], hi))
            if cover > best_cover:
                best, best_cover = other, cover
        if best is not None and best_cover >= 0.5 * width:
            other_words, _ = _thread_note(ctx, a + flatnonzero(overlapping & (tids == best)), lo, hi)
            note += f"; busiest tid {best}: {other_words}"
    return note

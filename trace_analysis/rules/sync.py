"""sync-calls, sync-memcpy, sync-memset and pageable-memcpy: blocking host⇄device interactions."""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from ..analyses.arrays import distinct, flatnonzero, member
from ..analyses.gpu import device_groups
from ..analyses.intervals import merge, union_length
from ..model import Events
from ..units import fmt_bytes, fmt_us
from ._common import BaseRule, GpuRule
from .base import Finding, Severity, ThresholdValue, count_of
from .context import RuleContext, contained_in

__all__ = ["SYNC_COST_BASIS", "SyncCalls", "SyncMemcpy", "SyncMemset", "PageableMemcpy"]

SYNC_RUNTIME = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
    }
)
SYNC_OPS = frozenset({"aten::item", "aten::_local_scalar_dense"})
_SYNC_MEMCPY = re.compile(
    r"^(cudaMemcpy|cudaMemcpy2D|cudaMemcpy3D|cudaMemcpyToSymbol|cudaMemcpyFromSymbol|cuMemcpy"
    r"(HtoD|DtoH|DtoD)?(_v2)?)$"
)
_SYNC_MEMSET = re.compile(r"^(cudaMemset|cudaMemset2D|cudaMemset3D|cuMemsetD(8|16|32)(_v2)?)$")


class SyncCalls(BaseRule):
    id = "sync-calls"
    title = "Blocking synchronization in the step"
    thresholds = {"min_calls": 1, "skip_first_step": True}
    fix = (
        "Avoid .item(), .cpu(), .tolist() and printing tensors inside the training loop (accumulate metrics on "
        "the device and read them every N steps); order streams with events (cudaStreamWaitEvent / "
        "torch.cuda.Event.wait) instead of synchronizing the host."
    )

    def _window(self, ctx: RuleContext, skip_first: bool) -> tuple[float, float]:
        # steady state: skip the first profiled step (allocator warm-up, cudnn autotuning) when there are more
        if skip_first and len(ctx.steps) >= 2:
            return ctx.steps[1].ts, ctx.window[1]
        return ctx.window

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        lo, hi = self._window(ctx, bool(thresholds["skip_first_step"]))
        rt, ops = ctx.runtime, ctx.cpu_ops
        rt_win = (rt.ts >= lo) & (rt.ts < hi)
        rt_sel = ctx.names_in(rt, SYNC_RUNTIME)
        op_sel = ctx.names_in(ops, SYNC_OPS) & (ops.ts >= lo) & (ops.ts < hi)
        is_item = ctx.names_in(ops, ("aten::item",))
        n_item_all = int((is_item & op_sel).sum())
        op_sel &= ~_host_reads(ctx, op_sel)
        # .cpu() / .item() on a GPU tensor: a copy to pageable host memory blocks the host until it is done
        mc = ctx.memcpy
        launch = ctx.memcpy_launch
        to_host = (launch >= 0) & ctx.pageable_memcpy & ctx.mask(mc, lambda n: "DtoH" in n, "DtoH")
        dtoh_calls = _positions(rt.index, launch[to_host])
        rt_sel[dtoh_calls] = True
        rt_sel &= rt_win
        # by the launch call's time, as the calls they are counted among (not the copy's: n_rt below would be off)
        n_dtoh = int(rt_win[dtoh_calls].sum())
        gs = ctx.gpu_sync
        gs_sel = (gs.ts >= lo) & (gs.ts < hi)
        n_rt, n_item, n_gs = int(rt_sel.sum()) - n_dtoh, int(op_sel.sum()), int(gs_sel.sum())
        # aten::item contains aten::_local_scalar_dense: count the outer calls only
        n_item_device = int((is_item & op_sel).sum())
        n_item_outer = n_item_device or n_item
        if n_rt + n_dtoh + n_item + n_gs < max(int(thresholds["min_calls"]), 1):
            return []
        host_s = np.concatenate((rt.ts[rt_sel], ops.ts[op_sel]))
        host_e = np.concatenate((rt.end[rt_sel], ops.end[op_sel]))
        host_blocked = union_length(host_s, host_e)
        counts = {
            "sync_runtime_calls": n_rt,
            "item_calls": n_item_outer,
            "cuda_sync_events": n_gs,
            "blocking_dtoh_copies": n_dtoh,
            "host_blocked_us": host_blocked,
            "cpu_item_calls": n_item_all - n_item_device,
        }
        basis, after = None, 0.0
        if ctx.has_gpu:
            after, caused = _gpu_idle_per_device(ctx, host_s, host_e, hi)
            counts["gpu_idle_after_sync_us"] = after
            counts["gpu_idle_caused_us"] = caused
            lost = caused
            basis = SYNC_COST_BASIS
            floor = Severity.LOW
        else:
            lost = host_blocked
            floor = Severity.INFO  # on a CPU-only run .item() does not wait for a device; it will on a GPU
        rows_rt = flatnonzero(rt_sel)
        rows_op = flatnonzero(op_sel)  # op_sel is already SYNC_OPS (.item() and _local_scalar_dense)
        examples = ctx.longest_examples(rt, rows_rt, limit=2)
        examples += ctx.longest_examples(ops, rows_op, limit=3 - len(examples))
        parts = []
        if n_rt:
            parts.append(count_of(n_rt, "CUDA synchronize call"))
        if n_item_outer:
            parts.append(count_of(n_item_outer, ".item() call"))
        if n_dtoh:
            parts.append(count_of(n_dtoh, "blocking copy", "blocking copies") + " to pageable host memory (.cpu())")
        if n_gs:
            parts.append(count_of(n_gs, "cuda_sync event"))
        where = "steady-state steps" if len(ctx.steps) >= 2 and thresholds["skip_first_step"] else ctx.window_name
        # Both costs, so that the time lost (GPU idle the syncs cause) and the examples (the longest syncs: host
        # time) add up: a copy that blocks the host 147 ms while the GPU works through its queue costs it little.
        cost = ""
        if ctx.has_gpu:
            idle = f"GPU idle {fmt_us(lost)} caused by them" if lost > 0 else "no GPU idle caused by them"
            cost = f": host blocked {fmt_us(host_blocked)}, {idle}"
            if after > lost:  # the rest of the idle after them is the host's own pace (it would idle anyway)
                cost += f" (of {fmt_us(after)} idle after them)"
        return [
            self.finding(
                ctx,
                f"{', '.join(parts)} in the {where}{cost}",
                time_lost_us=lost,
                counts=counts,
                examples=examples,
                floor=floor,
                basis=basis,
                no_loss_reason="the GPU was not idle between the syncs and the next GPU work" if basis else None,
            )
        ]


SYNC_COST_BASIS = (
    "GPU idle the syncs cause: from the later of a sync's start and the end of the GPU work begun before it "
    "returned, to the next GPU work after it, at most the host time the syncs blocked"
)


def _gpu_idle_per_device(ctx: RuleContext, host_s: np.ndarray, host_e: np.ndarray, hi: float) -> tuple[float, float]:
    """``_gpu_idle_of_syncs`` of each GPU device, and their mean (as the temporal breakdown's figures): a sync
    drains the GPUs it waits for while the others may keep running, and a GPU's idle is its own."""
    g = ctx.gpu_activity
    if len(ctx.device_busy) <= 1:
        return _gpu_idle_of_syncs(g, host_s, host_e, hi)
    groups = device_groups(ctx.gpu_device_of(g))
    after = caused = 0.0
    for _, sel in groups:
        a, c = _gpu_idle_of_syncs(g if sel is None else g.take(sel), host_s, host_e, hi)
        after, caused = after + a, caused + c
    return after / len(groups), caused / len(groups)


def _gpu_idle_of_syncs(g: Events, host_s: np.ndarray, host_e: np.ndarray, hi: float) -> tuple[float, float]:
    """(GPU idle after the syncs, GPU idle they cause), µs, for syncs blocking the host over [host_s, host_e].

    After a sync returns the device is drained and stays idle until the host's next work reaches it; but on a
    host-bound trace most of that gap is the host's own pace (Python, data loading): it would idle anyway. A
    sync delays the host by the time it blocked, so removing it brings the next GPU work forward by at most that
    much. And while the GPU still runs work queued before the sync, its idle moments are not the sync's doing
    (cross-stream waits in a queue hundreds of launches deep). So, per group of syncs followed by the same next
    GPU row: caused = min(next start − max(first sync's start, end of the GPU rows begun before the sync returned,
    the previous group's next start), the union of the group's blocked host time), never negative; the next
    start is cut at ``hi`` (the window end). No GPU row starts inside that interval (the group's definition), so
    it is all idle.

    "after": the former measure, the union of [sync end, next GPU start] where no GPU row spanned the sync's
    return (kept as a count: the whole gap after the syncs, of which "caused" is the part they account for)."""
    starts = g.ts  # sorted by the model
    n = starts.shape[0]
    if not n or not host_s.shape[0]:
        return 0.0, 0.0
    nxt = starts.searchsorted(host_e)
    ok = nxt < n
    nxt_ts = np.minimum(starts[np.minimum(nxt, n - 1)], hi)
    gap = ok & ~_running_at(g, host_e) & (nxt_ts > host_e)
    after = union_length(host_e[gap], nxt_ts[gap])  # union: several syncs in one idle gap count once
    bs, be = merge(host_s, host_e)  # .item() encloses its cudaStreamSynchronize: blocked host time once
    nxt = starts.searchsorted(be)
    ok = nxt < n
    if not ok.any():
        return after, 0.0
    bs, be, nxt = bs[ok], be[ok], nxt[ok]
    first = np.empty(bs.shape[0], bool)  # groups: consecutive blocked intervals with the same next GPU row
    first[0] = True
    first[1:] = nxt[1:] != nxt[:-1]
    heads = flatnonzero(first)
    g_end = np.minimum(starts[nxt[heads]], hi)
    # the end of the GPU work begun before the group's first sync returned (rows before position nxt)
    run_end = np.maximum.accumulate(g.end)
    k = nxt[heads] - 1
    drained = np.where(k >= 0, run_end[np.maximum(k, 0)], -np.inf)
    g_start = np.maximum(bs[heads], drained)
    g_start[1:] = np.maximum(g_start[1:], g_end[:-1])  # never before the previous group's next GPU start
    idle = np.maximum(g_end - g_start, 0.0)
    blocked = np.add.reduceat(be - bs, heads)
    return after, float(np.minimum(idle, blocked).sum())


def _host_reads(ctx: RuleContext, sel: np.ndarray) -> np.ndarray:
    """Which of the ``sel`` rows of ``ctx.cpu_ops`` (.item() / _local_scalar_dense) read a CPU tensor: no wait for
    a device. On a GPU trace, those that call no CUDA runtime function: reading a CUDA tensor records its
    cudaMemcpyAsync (and the stream sync) inside the call (negative_queue's 945 .item() calls of int CPU tensors,
    on a side thread, call none). On a CPU-only trace (no runtime calls to tell) the same code may read CUDA
    tensors on a GPU, so only PyTorch's own reads are left out: Adam/AdamW read each parameter's CPU step
    counter with .item() inside ``Optimizer.step#`` (not the user's code)."""
    ops = ctx.cpu_ops
    out = np.zeros(len(ops), bool)
    rows = flatnonzero(sel)
    if not rows.shape[0]:
        return out
    rt = ctx.runtime
    if ctx.has_gpu and len(rt):
        out[rows[~_encloses(rt, ops, rows)]] = True
        return out
    steps = flatnonzero(ctx.mask(ops, lambda n: n.startswith("Optimizer.step#"), "Optimizer.step#"))
    inside = rows[contained_in(ops.ts[rows], ops.tid[rows], ops, steps) >= 0]
    out[inside[~_encloses(rt, ops, inside)]] = True
    return out


def _encloses(rt: Events, ops: Events, rows: np.ndarray) -> np.ndarray:
    """For each of ``rows`` of ``ops``: whether a runtime call of ``rt`` starts within it, on its thread. Calls may
    nest or overlap (an .item() encloses its _local_scalar_dense): counted by bisection, per thread."""
    out = np.zeros(rows.shape[0], bool)
    if not rows.shape[0] or not len(rt):
        return out
    o_tid, o_ts = ops.tid[rows], ops.ts[rows]
    o_end = o_ts + ops.dur[rows]
    r_tid, r_ts = rt.tid, rt.ts
    for tid in distinct(o_tid):  # one numpy pass per thread that runs such calls (a handful)
        mine = flatnonzero(o_tid == tid)
        starts = np.sort(r_ts[r_tid == tid])
        out[mine] = starts.searchsorted(o_end[mine], side="right") > starts.searchsorted(o_ts[mine], side="left")
    return out


def _positions(sorted_rows: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Positions in ``sorted_rows`` (ascending, distinct) of those of ``rows`` it holds (np.isin by bisection)."""
    if not sorted_rows.shape[0] or not rows.shape[0]:
        return np.empty(0, np.int64)
    pos = np.minimum(sorted_rows.searchsorted(rows), sorted_rows.shape[0] - 1)
    return pos[sorted_rows[pos] == rows]


def _running_at(g: Events, t: np.ndarray) -> np.ndarray:
    """For each time t, whether some GPU row spans it (row start < t < row end); rows sorted by ts."""
    if not len(g):
        return np.zeros(t.shape[0], bool)
    run_end = np.maximum.accumulate(g.end)
    k = g.ts.searchsorted(t, side="left") - 1
    return (k >= 0) & (run_end[np.maximum(k, 0)] > t)


def _blocking_calls(rule: GpuRule, ctx: RuleContext, idx: np.ndarray, call: str) -> list[Finding]:
    """One finding for the synchronous runtime calls at ``idx`` of ``ctx.runtime``: their time is host time lost."""
    rt = ctx.runtime
    lost = float(rt.dur[idx].sum())
    return [
        rule.finding(
            ctx,
            f"{count_of(idx.shape[0], f'synchronous {call} call')} block{'s' if idx.shape[0] == 1 else ''} the host "
            f"for {lost / 1000:.2f} ms",
            time_lost_us=lost,
            counts={"calls": idx.shape[0]},
            examples=ctx.longest_examples(rt, idx),
        )
    ]


class SyncMemcpy(GpuRule):
    id = "sync-memcpy"
    title = "Synchronous memory copies"
    thresholds = {"skip_htod_bytes": 65536}
    fix = (
        "Use cudaMemcpyAsync on a stream (in PyTorch: tensor.to(device, non_blocking=True) from pinned memory) "
        "so the host does not block on each copy."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        rt = ctx.runtime
        sel = ctx.mask(rt, lambda n: _SYNC_MEMCPY.match(n) is not None, ("cudaMemcpy", "cuMemcpy")) & ctx.in_window(rt)
        if not sel.any():
            return []
        # small HtoD copies are synchronous by nature (staged through a driver buffer): skip them (Nsight)
        mc = ctx.memcpy
        found = ctx.memcpy_launch >= 0
        htod = ctx.mask(mc, lambda n: "HtoD" in n, "HtoD")
        small = found & htod & (mc.bytes >= 0) & (mc.bytes <= int(thresholds["skip_htod_bytes"]))
        skip_corr = mc.correlation[small]
        sel &= ~member(rt.correlation, skip_corr)
        idx = flatnonzero(sel)
        return _blocking_calls(self, ctx, idx, "cudaMemcpy") if idx.shape[0] else []


class SyncMemset(GpuRule):
    id = "sync-memset"
    title = "Synchronous memsets"
    thresholds = {"min_calls": 1}
    fix = "Use cudaMemsetAsync on a stream (PyTorch's zero_/fill_ already do); look for custom extensions."

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        rt = ctx.runtime
        sel = ctx.mask(rt, lambda n: _SYNC_MEMSET.match(n) is not None, ("cudaMemset", "cuMemset"))
        idx = flatnonzero(sel & ctx.in_window(rt))
        if idx.shape[0] < max(int(thresholds["min_calls"]), 1):
            return []
        return _blocking_calls(self, ctx, idx, "cudaMemset")


class PageableMemcpy(GpuRule):
    id = "pageable-memcpy"
    title = "Copies from pageable host memory"
    thresholds = {"min_copies": 1}
    fix = (
        "Copies from pageable memory are staged and cannot overlap compute: use pin_memory=True in the "
        "DataLoader (or tensor.pin_memory()) and .to(device, non_blocking=True)."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        mc = ctx.memcpy
        idx = flatnonzero(ctx.pageable_memcpy & ctx.in_window(mc))
        if idx.shape[0] < max(int(thresholds["min_copies"]), 1):
            return []
        lost = float(mc.dur[idx].sum())
        nbytes = mc.bytes[idx]
        total_bytes = int(nbytes[nbytes > 0].sum())
        return [
            self.finding(
                ctx,
                f"{count_of(idx.shape[0], 'memory copy', 'memory copies')} from/to pageable memory "
                f"({fmt_bytes(float(total_bytes))}, {fmt_us(lost)} of GPU time)",
                time_lost_us=lost,
                counts={"copies": idx.shape[0], "bytes": total_bytes},
                examples=ctx.longest_examples(mc, idx, where="stream"),
            )
        ]

"""Per-rank summary for the report: span, GPU breakdown, step times, top tables, utilization timeline."""

from __future__ import annotations

import numpy as np

from ..analyses.temporal import temporal_breakdown
from ..model import Cat, Events
from ..rules.context import RuleContext
from ..rules.gpu_util import utilization_timeline
from .model import Breakdown, RankSummary, StepStats, TableRow, Timeline

__all__ = ["summarize_rank", "top_by_name"]

TOP_N = 10
TIMELINE_BINS = 60


def top_by_name(ctx: RuleContext, events: Events, reference_us: float, n: int = TOP_N) -> tuple[TableRow, ...]:
    """Rows grouped by name, largest total duration first (one bincount, no per-event Python)."""
    if not len(events):
        return ()
    ids, inv = np.unique(events.name, return_inverse=True)
    totals = np.bincount(inv, weights=events.dur)
    counts = np.bincount(inv)
    order = np.argsort(-totals, kind="stable")[:n]
    return tuple(
        TableRow(
            name=ctx.trace.strings[int(ids[i])],
            count=int(counts[i]),
            total_us=float(totals[i]),
            share=float(totals[i] / reference_us) if reference_us > 0 else 0.0,
        )
        for i in order
    )


def _steps(ctx: RuleContext) -> StepStats | None:
    if not ctx.steps:
        return None
    d = np.asarray([s.dur for s in ctx.steps], dtype=np.float64)
    return StepStats(len(d), float(d.mean()), float(np.median(d)), float(d.min()), float(d.max()), tuple(d.tolist()))


def summarize_rank(ctx: RuleContext) -> RankSummary:
    trace = ctx.trace
    lo, hi = ctx.span
    breakdown = None
    top_kernels: tuple[TableRow, ...] = ()
    timelines: tuple[Timeline, ...] = ()
    if ctx.has_gpu:
        # dyno's definition: cuda_sync rows are the host waiting, not GPU work (HTA counts them; see docs)
        tb = temporal_breakdown(trace, sync_is_busy=False)
        breakdown = Breakdown(
            span_us=tb.span_us,
            idle_us=tb.idle_us,
            compute_us=tb.compute_us,
            non_compute_us=tb.non_compute_us,
            communication_us=tb.communication_us,
            memory_us=tb.memory_us,
        )
        busy = float(ctx.gpu_activity.dur.sum())
        top_kernels = top_by_name(ctx, ctx.gpu_activity, busy)
        timelines = tuple(
            Timeline(dev, tuple(edges.tolist()), tuple(util.tolist()))
            for dev, (edges, util) in utilization_timeline(ctx, TIMELINE_BINS).items()
        )
    ops = ctx.cpu_ops
    cpu = ops.take(ops.cat == Cat.CPU_OP)
    return RankSummary(
        rank=ctx.rank,
        source=ctx.source,
        has_gpu=ctx.has_gpu,
        events=len(trace.events),
        span_us=hi - lo,
        window_kind=ctx.window_kind,
        window_us=ctx.window_us,
        steps=_steps(ctx),
        breakdown=breakdown,
        top_kernels=top_kernels,
        top_cpu_ops=top_by_name(ctx, cpu, ctx.window_us),
        timelines=timelines,
    )

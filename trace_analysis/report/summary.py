"""Per-rank summary for the report, assembled from the shared analyses: span, GPU temporal breakdown, step
times, top kernels, top CPU ops (self and total time) and the GPU-utilization timeline."""

from __future__ import annotations

from ..analyses.cpu_ops import cpu_op_summary
from ..analyses.kernels import kernel_breakdown
from ..analyses.overlap import CommCompOverlap, comm_comp_overlap
from ..analyses.steps import step_timings
from ..analyses.temporal import TemporalBreakdown, temporal_breakdown
from ..rules.context import RuleContext
from ..rules.gpu_util import utilization_timeline
from .model import CPU_OP_TIME, Breakdown, DeviceBreakdown, RankSummary, StepStats, TableRow, Timeline

__all__ = ["summarize_rank"]

TOP_N = 10
TIMELINE_BINS = 60


def _steps(ctx: RuleContext) -> StepStats | None:
    st = step_timings(ctx.trace)
    if not st.steps:
        return None
    return StepStats(
        source=st.source,
        count=len(st.steps),
        mean_us=st.mean_us,
        median_us=st.median_us,
        min_us=st.min_us,
        max_us=st.max_us,
        durations_us=tuple(float(s.dur_us) for s in st.steps),
        std_us=st.std_us,
    )


def _devices(tb: TemporalBreakdown, overlap: CommCompOverlap) -> tuple[DeviceBreakdown, ...]:
    """Each GPU of a rank that drives several (the breakdown's figures are their mean)."""
    exposed = {o.device: o.communication_us - o.overlap_us for o in overlap.devices}
    return tuple(
        DeviceBreakdown(
            device=d.device,
            idle_us=d.idle_us,
            compute_us=d.compute_us,
            non_compute_us=d.non_compute_us,
            communication_us=d.communication_us,
            memory_us=d.memory_us,
            exposed_communication_us=exposed.get(d.device, 0.0),
        )
        for d in tb.devices
    )


def summarize_rank(ctx: RuleContext) -> RankSummary:
    trace = ctx.trace
    lo, hi = ctx.span
    breakdown = None
    top_kernels: tuple[TableRow, ...] = ()
    timelines: tuple[Timeline, ...] = ()
    if ctx.has_gpu:
        # dyno's definition: cuda_sync rows are the host waiting, not GPU work (HTA counts them; see docs)
        tb = temporal_breakdown(trace, sync_is_busy=False)
        overlap = comm_comp_overlap(trace)  # same window, cached
        breakdown = Breakdown(
            span_us=tb.span_us,
            idle_us=tb.idle_us,
            compute_us=tb.compute_us,
            non_compute_us=tb.non_compute_us,
            communication_us=tb.communication_us,
            memory_us=tb.memory_us,
            exposed_communication_us=overlap.exposed_communication_us,
            comm_overlap_share=overlap.overlap_share,
            devices=_devices(tb, overlap) if tb.n_devices > 1 else (),
        )
        kb = kernel_breakdown(trace, top_n=TOP_N)
        top_kernels = tuple(
            TableRow(k.name, k.count, k.total_us, k.share, kind=k.kernel_type, example_ts_us=k.example_ts)
            for k in kb.top
        )
        timelines = tuple(
            Timeline(dev, tuple(edges.tolist()), tuple(util.tolist()))
            for dev, (edges, util) in utilization_timeline(ctx, TIMELINE_BINS).items()
        )
    window = ctx.window_us
    ops = cpu_op_summary(trace, top_n=TOP_N)
    # shares of the window, or of the CPU ops' own time when that is longer: ops run on several threads at once
    # (a trace of every thread) or outside the step window add up to more than the window, and an op's self time
    # was "400% of the window" on a 4-thread trace (JSON shares are fractions 0..1)
    basis = max(window, ops.wall_us)
    top_ops = tuple(
        TableRow(
            o.name,
            o.count,
            o.total_us,
            o.self_us / basis if basis > 0 else 0.0,
            self_us=o.self_us,
            example_ts_us=o.example_ts,
        )
        for o in ops.by_self
    )
    return RankSummary(
        rank=ctx.rank,
        source=ctx.source,
        has_gpu=ctx.has_gpu,
        events=len(trace.events),
        span_us=hi - lo,
        window_kind=ctx.window_kind,
        window_name=ctx.window_name,
        window_us=window,
        steps=_steps(ctx),
        breakdown=breakdown,
        top_kernels=top_kernels,
        top_cpu_ops=top_ops,
        cpu_ops_share_of=CPU_OP_TIME if basis > window else "window",
        timelines=timelines,
    )

"""Per-rank summary for the report, assembled from the shared analyses: span, GPU temporal breakdown, step
times, top kernels, top CPU ops (self and total time), the GPU-utilization timeline and HTA's tables (idle time
per stream, kernel types with overlaps, launch statistics, queue length)."""

from __future__ import annotations

from ..analyses.cpu_ops import cpu_op_summary
from ..analyses.host_time import host_time
from ..analyses.idle_time import idle_time_breakdown
from ..analyses.kernel_overlap import kernel_type_overlap
from ..analyses.kernels import kernel_breakdown
from ..analyses.launch import launch_stats, queue_length
from ..analyses.overlap import CommCompOverlap, comm_comp_overlap
from ..analyses.steps import step_timings
from ..analyses.temporal import TemporalBreakdown, temporal_breakdown
from ..model import Trace
from ..rules.context import RuleContext
from ..rules.gpu_util import utilization_timeline
from .model import CPU_OP_TIME, Breakdown, DeviceBreakdown, HostTime, RankSummary, StepStats, TableRow, Timeline
from .tables import (
    GpuTables,
    IdleTable,
    KernelTypeRow,
    KernelTypeTable,
    LaunchTable,
    QueueRow,
    StreamIdleRow,
    describe,
)

__all__ = ["gpu_tables", "summarize_rank"]

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
        markers=st.markers,
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


def gpu_tables(trace: Trace, *, hta_ns_rounding: bool = False) -> GpuTables:
    """HTA's four tables with HTA's default settings, from the analyses the rules share (cached on the trace).
    ``hta_ns_rounding`` reproduces HTA's rounding of float timestamps (tests); the report keeps exact times."""
    it = idle_time_breakdown(trace, hta_ns_rounding=hta_ns_rounding)
    idle = IdleTable(
        it.consecutive_kernel_delay_us,
        tuple(
            StreamIdleRow(
                s.device, s.stream, s.host_wait_us, s.kernel_wait_us, s.other_us, s.n_gaps, s.n_host_wait,
                s.n_kernel_wait,
            )
            for s in it.streams
        ),
    )  # fmt: skip
    ko = kernel_type_overlap(trace, hta_ns_rounding=hta_ns_rounding)
    kinds = KernelTypeTable(ko.total_us, tuple(KernelTypeRow(c.kernel_type, c.us, c.share) for c in ko.categories))
    ls = launch_stats(trace, hta_ns_rounding=hta_ns_rounding)
    launch = LaunchTable(
        launches=ls.n_launches,
        runtime_cutoff_us=ls.runtime_cutoff_us,
        launch_delay_cutoff_us=ls.launch_delay_cutoff_us,
        short_kernels=int(ls.short_kernels.sum()),
        runtime_outliers=int(ls.runtime_outliers.sum()),
        delay_outliers=int(ls.delay_outliers.sum()),
        cpu_duration_us=describe(ls.cpu_duration),
        gpu_duration_us=describe(ls.gpu_duration),
        launch_delay_us=describe(ls.launch_delay),
    )
    ql = queue_length(trace, hta_ns_rounding=hta_ns_rounding)
    queue = tuple(
        QueueRow(d, s, describe(ql.length[(ql.device == d) & (ql.stream == s)]))
        for d, s in sorted(ql.max_by_device_stream)
    )
    return GpuTables(idle, kinds, launch, queue)


def summarize_rank(ctx: RuleContext) -> RankSummary:
    trace = ctx.trace
    lo, hi = ctx.span
    breakdown = None
    top_kernels: tuple[TableRow, ...] = ()
    timelines: tuple[Timeline, ...] = ()
    tables = None
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
        tables = gpu_tables(trace)
    window = ctx.window_us
    ht = host_time(trace, *ctx.window)
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
        tables=tables,
        host_time=HostTime(ht.window_us, ht.ops_us, ht.other_us, ht.untraced_us),
    )

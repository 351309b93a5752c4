"""short-kernels, slow-runtime-calls and launch-queue: the CUDA launch path (runtime call ⇄ GPU row).

All three read ``analyses.launch`` (launch stats joined by correlation id, and the per-stream launch-queue
length, HTA's definitions). short-kernels and slow-runtime-calls count the launch calls that start inside the
window they divide by (the profiler steps, else the trace span); launch-queue reports HTA's figures over HTA's
GPU scope (ratios of launches and a queue length, not shares of the window).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..analyses.arrays import median, member
from ..analyses.launch import LaunchStats, launch_stats, queue_length
from ..model import Cat
from ..units import fmt_us
from ._common import GpuRule, gpu_bound, whole_window_scope
from .base import Finding, Severity, Share, ThresholdValue, count_of
from .context import RuleContext
from .startup import STARTUP_MIN_CALL_US, first_kernel_launches

__all__ = ["ShortKernels", "SlowRuntimeCalls", "LaunchQueue"]


def _stats(
    ctx: RuleContext, runtime_cutoff_us: float, delay_cutoff_us: float = 100.0, *, windowed: bool = False
) -> LaunchStats:
    """Cached on the trace by the analysis. ``windowed``: every launch up to the window's end (for ``_in_window``),
    else HTA's scope."""
    include_last_step = whole_window_scope(ctx) if windowed else False
    return launch_stats(
        ctx.trace,
        runtime_cutoff_us=runtime_cutoff_us,
        launch_delay_cutoff_us=delay_cutoff_us,
        include_last_step=include_last_step,
    )


def _in_window(ctx: RuleContext, st: LaunchStats) -> tuple[np.ndarray, np.ndarray]:
    """Mask over ``st``'s launches whose call starts inside ``ctx.window`` (as sync-calls counts calls), and each
    call's time up to the window's end (a call crossing it counts its part inside)."""
    lo, hi = ctx.window
    call_ts = ctx.trace.events.ts[st.runtime_row]
    inside = (call_ts >= lo) & (call_ts < hi)
    return inside, np.minimum(st.cpu_duration, hi - call_ts)


class ShortKernels(GpuRule):
    id = "short-kernels"
    title = "Kernels shorter than their launch"
    thresholds = {"max_launch_us": 50.0, "min_share_of_launches": Share(0.20), "gpu_bound_util": Share(0.9)}
    fix = (
        "Most kernels finish before the CPU finishes launching them, so the host sets the pace: fuse small ops "
        "(torch.compile), use CUDA graphs, or give each kernel more work (larger batch)."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        st = _stats(ctx, float(thresholds["max_launch_us"]), windowed=True)
        inside, call_us = _in_window(ctx, st)
        is_kernel = (ctx.trace.events.cat[st.gpu_row] == Cat.KERNEL.value) & inside
        total = int(is_kernel.sum())
        if not total:
            return []
        short = st.short_kernels & is_kernel
        n = int(short.sum())
        ratio = n / total
        if ratio < float(thresholds["min_share_of_launches"]):
            return []
        host = float(call_us[short].sum())  # host time spent launching work shorter than its launch
        rows = st.gpu_row[short]
        # as slow-runtime-calls: launch time is a cost only while the GPU waits for the host; on a GPU-bound trace
        # the host runs ahead and launch overhead is hidden behind GPU work (no time lost, info, kept in counts)
        bound = gpu_bound(ctx, float(thresholds["gpu_bound_util"]))
        note = f" ({bound.label}: launch time hidden behind GPU work when GPU-bound)" if bound.bound else ""
        return [
            self.finding(
                ctx,
                f"{n} of {total} kernels ({ratio:.0%}) run shorter than their launch call{note}",
                time_lost_us=bound.host_cost(host),
                counts={
                    "short_kernels": n,
                    "launches": total,
                    "share_of_launches": ratio,
                    "median_kernel_us": median(st.gpu_duration[short]),
                    "median_launch_us": median(st.cpu_duration[short]),
                    "launch_host_us": host,
                    "gpu_utilization": bound.utilization,
                },
                examples=ctx.examples(ctx.trace.events, rows, where="stream"),
                floor=Severity.MEDIUM if ratio >= 0.5 else Severity.LOW,
                cap=bound.cap,
                basis="host time in the launch calls of the short kernels",
                no_loss_reason=bound.no_loss_reason("the host runs ahead of the GPU, launch time is hidden"),
            )
        ]


class SlowRuntimeCalls(GpuRule):
    id = "slow-runtime-calls"
    title = "Slow CUDA runtime calls"
    thresholds = {"max_call_us": 50.0, "min_calls": 1, "gpu_bound_util": Share(0.9)}
    fix = (
        "Launch/copy calls that take this long usually wait on something: a full launch queue (see "
        "launch-queue), lock contention from other threads, or an oversubscribed host (check CPU usage). "
        "(Copies to/from pageable memory, which block by design, are left to pageable-memcpy and sync-calls.)"
    )
    # when most of the time is kernels' first launches: one-off start-up, not a wait (alexnet: a 3.06 s
    # cudaLaunchKernel, the first of its kernel, was sent to look for a full queue that never passed 18 launches)
    first_launch_fix = (
        "Most of this time is the first launch of a kernel: CUDA loads the kernel's module on first use (lazy "
        "loading: the default since CUDA 12.2, and PyTorch sets CUDA_MODULE_LOADING=LAZY when it is unset) or "
        "JIT-compiles its PTX, once per process. That is start-up, not a "
        "per-step cost: profile steady-state steps (torch.profiler.schedule(wait=1, warmup=1, active=N)) to leave "
        "it out, or set CUDA_MODULE_LOADING=EAGER to pay it before training starts; a JIT taking seconds means the "
        "binaries lack code for this GPU's architecture (build for it: TORCH_CUDA_ARCH_LIST)."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        limit = float(thresholds["max_call_us"])
        st = _stats(ctx, limit, windowed=True)
        inside, call_us = _in_window(ctx, st)
        slow = st.runtime_outliers & inside
        # A copy to/from pageable memory blocks the call until the data is staged (DtoH: until the copy is done):
        # its time is the copy's, reported by pageable-memcpy (and sync-calls for .cpu()), not a slow launch.
        blocking = slow & member(st.gpu_row, _pageable_copy_rows(ctx))
        slow &= ~blocking
        n = int(slow.sum())
        if n < max(int(thresholds["min_calls"]), 1):
            return []
        dur = st.cpu_duration[slow]
        rows = st.runtime_row[slow][(-dur).argsort(kind="stable")]
        # A symptom of something else (queue, contention): never more than medium on its own, and expected
        # (launches block on a full queue) when the GPU is saturated.
        bound = gpu_bound(ctx, float(thresholds["gpu_bound_util"]))
        note = f" ({bound.label}: launches block on a full queue when GPU-bound)" if bound.bound else ""
        excess = np.maximum(call_us - limit, 0.0)
        over = float(excess[slow].sum())
        # a first launch is start-up (module loading, JIT) only when it is as long as one (the start-up measure's
        # floor): a first launch *in the trace* of a steady-state profile loads nothing, and 60 µs is no module load
        first = slow & first_kernel_launches(ctx, st) & (st.cpu_duration >= STARTUP_MIN_CALL_US)
        first_over = float(excess[first].sum())
        one_off = first_over >= 0.5 * over > 0
        if one_off:
            n_first = int(first.sum())
            note += f"; {n_first} of them the first launch of their kernel ({fmt_us(first_over)}: one-off start-up)"
        return [
            self.finding(
                ctx,
                f"{count_of(n, 'launch/copy runtime call')} took over {fmt_us(limit)} "
                f"(max {fmt_us(float(dur.max()))}){note}",
                # the host waiting while the GPU is saturated costs the job nothing: not reported as time lost
                # ("47% of the window" on a GPU-bound trace read as a loss); the host time stays in the counts
                time_lost_us=bound.host_cost(over),
                counts={
                    "slow_calls": n,
                    "max_us": float(dur.max()),
                    "pageable_copy_calls": int(blocking.sum()),
                    "host_time_over_limit_us": over,
                    "first_launch_calls": int(first.sum()),
                    "first_launch_over_limit_us": first_over,
                },
                examples=ctx.examples(ctx.trace.events, rows),
                # one-off start-up in the trace (a warm-up step profiled) is not the loop's cost: at most low
                cap=Severity.INFO if bound.bound else (Severity.LOW if one_off else Severity.MEDIUM),
                fix=self.first_launch_fix if one_off else None,
                basis=f"host time of the slow calls beyond {fmt_us(limit)}",
                no_loss_reason=bound.no_loss_reason("the host waits on a full launch queue, at no cost to the job"),
            )
        ]


def _pageable_copy_rows(ctx: RuleContext) -> np.ndarray:
    """Rows in ``trace.events`` of the memcpys from/to pageable host memory."""
    return ctx.memcpy.index[ctx.pageable_memcpy]


class LaunchQueue(GpuRule):
    id = "launch-queue"
    title = "Launch delay outliers or a saturated launch queue"
    thresholds = {
        "max_delay_us": 100.0,
        "queue_limit": 1024,
        "min_outlier_share": Share(0.05),
        "gpu_bound_util": Share(0.9),
    }
    fix = (
        "Expected when the GPU is the bottleneck (work queues up). Otherwise look at what the GPU runs just before "
        "the delayed rows in the examples: a long kernel earlier on the same stream (give independent work its "
        "own torch.cuda.Stream), or a wait on another stream, often a communication kernel (overlap it with "
        "compute, see exposed-comm). A queue near 1024 launches blocks the host at each launch: launch less "
        "(CUDA graphs, fused ops)."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        st = _stats(ctx, 50.0, float(thresholds["max_delay_us"]))
        if not st.n_launches:
            return []
        outliers = st.delay_outliers
        share = int(outliers.sum()) / st.n_launches  # bool mean: float64 count / n, the same division
        ql = queue_length(ctx.trace)
        qmax = ql.max_length
        saturated = qmax >= int(thresholds["queue_limit"])
        if share < float(thresholds["min_outlier_share"]) and not saturated:
            return []
        bound = gpu_bound(ctx, float(thresholds["gpu_bound_util"]))
        delay = st.launch_delay[outliers]
        # the delays themselves: the examples show the delayed GPU rows (their own duration), not how late they ran
        late = f" (median delay {fmt_us(median(delay))}, longest {fmt_us(float(delay.max()))})" if delay.size else ""
        what = (
            f"{count_of(int(outliers.sum()), 'launch', 'launches')} ({share:.0%}) started over "
            f"{fmt_us(float(thresholds['max_delay_us']))} after their launch call{late}; max queue length {qmax}"
        )
        if bound.bound:
            what += f" ({bound.label}: expected when GPU-bound)"
        rows = st.gpu_row[outliers][(-delay).argsort(kind="stable")]
        return [
            self.finding(
                ctx,
                what,
                counts={
                    "delayed_launches": int(outliers.sum()),
                    "launches": st.n_launches,
                    "median_delay_us": median(st.launch_delay),  # of every launch
                    # the title's figures (of the delayed launches): JSON readers saw 32.5 µs beside "median 880 µs"
                    "delayed_median_delay_us": median(delay) if delay.size else 0.0,
                    "max_delay_us": float(delay.max()) if delay.size else 0.0,
                    "max_queue_length": qmax,
                    "gpu_utilization": bound.utilization,
                },
                examples=ctx.examples(ctx.trace.events, rows, where="stream"),
                severity=Severity.INFO if bound.bound else (Severity.MEDIUM if saturated else Severity.LOW),
                # a state, not a cost: its cost shows as GPU idle (host-bound, low-gpu-util) when there is one
                no_loss_reason=bound.no_loss_reason("work queues up when the GPU is the bottleneck"),
            )
        ]

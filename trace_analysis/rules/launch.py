"""short-kernels, slow-runtime-calls and launch-queue: the CUDA launch path (runtime call ⇄ GPU row)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ._common import GpuRule, gpu_utilization, launch_join
from .base import Finding, Severity, ThresholdValue
from .context import RuleContext

__all__ = ["ShortKernels", "SlowRuntimeCalls", "LaunchQueue", "LAUNCH_CALLS"]

LAUNCH_CALLS = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cudaLaunchCooperativeKernel",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
    }
)


class ShortKernels(GpuRule):
    id = "short-kernels"
    title = "Kernels shorter than their launch"
    thresholds: Mapping[str, ThresholdValue] = {"max_launch_us": 50.0, "min_share_of_launches": 0.20}
    fix = (
        "Most kernels finish before the CPU finishes launching them, so the host sets the pace: fuse small ops "
        "(torch.compile), use CUDA graphs, or give each kernel more work (larger batch)."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        k = ctx.kernels
        rows, found = launch_join(ctx, k)
        if not found.any():
            return []
        rt = ctx.runtime
        r = rows[found]
        l_dur = rt.dur[r]
        k_dur = k.dur[found]
        short = (l_dur <= float(thresholds["max_launch_us"])) & (k_dur < l_dur)
        n, total = int(short.sum()), int(found.sum())
        ratio = n / total
        if ratio < float(thresholds["min_share_of_launches"]):
            return []
        lost = float(l_dur[short].sum())  # host time spent launching work shorter than its launch
        kpos = np.flatnonzero(found)[short]
        return [
            self.finding(
                ctx,
                f"{n} of {total} kernels ({ratio:.0%}) run shorter than their launch call",
                time_lost_us=lost,
                counts={
                    "short_kernels": n,
                    "launches": total,
                    "share_of_launches": ratio,
                    "median_kernel_us": float(np.median(k_dur[short])),
                    "median_launch_us": float(np.median(l_dur[short])),
                },
                examples=ctx.examples(k, kpos[np.argsort(k.dur[kpos], kind="stable")], where="stream"),
                floor=Severity.MEDIUM if ratio >= 0.5 else Severity.LOW,
            )
        ]


class SlowRuntimeCalls(GpuRule):
    id = "slow-runtime-calls"
    title = "Slow CUDA runtime calls"
    thresholds: Mapping[str, ThresholdValue] = {"max_call_us": 50.0, "min_calls": 1, "gpu_bound_util": 0.9}
    fix = (
        "Launch/copy calls that take this long usually wait on something: a full launch queue (see "
        "launch-queue), lock contention from other threads, or an oversubscribed host (check CPU usage)."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        rt = ctx.runtime
        limit = float(thresholds["max_call_us"])
        slow = ctx.names_in(rt, LAUNCH_CALLS) & (rt.dur > limit)
        n = int(slow.sum())
        if n < max(int(thresholds["min_calls"]), 1):
            return []
        idx = np.flatnonzero(slow)
        lost = float((rt.dur[idx] - limit).sum())
        # A symptom of something else (queue, contention): never more than medium on its own, and expected
        # (launches block on a full queue) when the GPU is saturated.
        util = gpu_utilization(ctx)
        gpu_bound = util >= float(thresholds["gpu_bound_util"])
        note = f" (GPU busy {util:.0%}: launches block on a full queue when GPU-bound)" if gpu_bound else ""
        return [
            self.finding(
                ctx,
                f"{n} launch/copy runtime calls took over {limit:.0f} µs (max {rt.dur[idx].max():.0f} µs){note}",
                time_lost_us=lost,
                counts={"slow_calls": n, "max_us": float(rt.dur[idx].max())},
                examples=ctx.examples(rt, idx[np.argsort(-rt.dur[idx], kind="stable")]),
                cap=Severity.INFO if gpu_bound else Severity.MEDIUM,
            )
        ]


class LaunchQueue(GpuRule):
    id = "launch-queue"
    title = "Launch delay outliers or a saturated launch queue"
    thresholds: Mapping[str, ThresholdValue] = {
        "max_delay_us": 100.0,
        "queue_limit": 1024,
        "min_outlier_share": 0.05,
        "gpu_bound_util": 0.9,
    }
    fix = (
        "Expected when the GPU is the bottleneck (work queues up). Otherwise check stream usage: work serialized "
        "on one stream behind long kernels, or cross-stream waits delaying launches."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        g = ctx.gpu_activity
        rows, found = launch_join(ctx, g)
        if not found.any():
            return []
        rt = ctx.runtime
        r = rows[found]
        gpos = np.flatnonzero(found)
        delay = g.ts[found] - rt.end[r]
        outliers = delay > float(thresholds["max_delay_us"])
        share = float(outliers.mean())
        qmax = _max_queue_length(rt.ts[r], g.ts[found], ctx.gpu_device_of(g)[found], g.stream[found])
        saturated = qmax >= int(thresholds["queue_limit"])
        if share < float(thresholds["min_outlier_share"]) and not saturated:
            return []
        util = gpu_utilization(ctx)
        gpu_bound = util >= float(thresholds["gpu_bound_util"])
        what = f"{int(outliers.sum())} launches ({share:.0%}) started over {float(thresholds['max_delay_us']):.0f} µs"
        what += f" after their launch call; max queue length {qmax}"
        if gpu_bound:
            what += f" (GPU busy {util:.0%}: expected when GPU-bound)"
        order = gpos[outliers][np.argsort(-delay[outliers], kind="stable")]
        return [
            self.finding(
                ctx,
                what,
                counts={
                    "delayed_launches": int(outliers.sum()),
                    "launches": int(found.sum()),
                    "median_delay_us": float(np.median(delay)),
                    "max_queue_length": qmax,
                    "gpu_utilization": util,
                },
                examples=ctx.examples(g, order, where="stream"),
                severity=Severity.INFO if gpu_bound else (Severity.MEDIUM if saturated else Severity.LOW),
            )
        ]


def _max_queue_length(launch_ts: np.ndarray, start_ts: np.ndarray, dev: np.ndarray, stream: np.ndarray) -> int:
    """Max over streams of (#launched − #started): +1 at each launch call, −1 at each GPU start (HTA)."""
    key = dev.astype(np.int64) * (1 << 32) + stream.astype(np.int64)
    best = 0
    for k in np.unique(key):
        sel = key == k
        t = np.r_[launch_ts[sel], start_ts[sel]]
        d = np.r_[np.ones(int(sel.sum()), np.int64), -np.ones(int(sel.sum()), np.int64)]
        order = np.lexsort((-d, t))  # at equal times count the launch first
        best = max(best, int(np.cumsum(d[order]).max()))
    return best

"""host-bound and launch-overhead: per-stream idle split into host_wait / kernel_wait / other.

Both read ``analyses.idle_time.idle_time_breakdown`` (HTA's definitions) and judge the compute stream (the
stream with the most GPU time): side streams (NCCL, copies) idle by design while compute runs.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..analyses.arrays import flatnonzero
from ..analyses.idle_time import HOST_WAIT, KERNEL_WAIT, IdleTimeBreakdown, idle_time_breakdown
from ._common import GpuRule, busiest_stream
from .base import Example, Finding, ThresholdValue
from .context import RuleContext

__all__ = ["HostBound", "LaunchOverhead"]


def _idle(ctx: RuleContext, kernel_wait_us: float) -> IdleTimeBreakdown:
    return idle_time_breakdown(ctx.trace, consecutive_kernel_delay_us=kernel_wait_us)  # cached on the trace


def _width(ctx: RuleContext) -> tuple[float, str]:
    """The window a share is of, and its name for the title: the steps when there are some, else the GPU span."""
    span = ctx.gpu_span
    if ctx.steps:
        return ctx.window_us, ctx.window_kind
    return (span[1] - span[0] if span else 0.0), "GPU span"


def _stream_share(ctx: RuleContext, idle: IdleTimeBreakdown, category: int) -> tuple[int, float, np.ndarray] | None:
    """(compute stream, its idle time of ``category``, mask of those gaps) or None when there is nothing."""
    stream = busiest_stream(ctx)
    if stream is None or not idle.gap_us.shape[0]:
        return None
    sel = (idle.gap_stream == stream) & (idle.gap_category == category) & (idle.gap_us > 0)
    return stream, float(idle.gap_us[sel].sum()), sel


def _gap_examples(idle: IdleTimeBreakdown, sel: np.ndarray, label: str) -> list[Example]:
    idx = flatnonzero(sel)
    idx = idx[(-idle.gap_us[idx]).argsort(kind="stable")][:3]
    return [
        Example(label, float(idle.gap_start[i]), float(idle.gap_us[i]), f"stream {int(idle.gap_stream[i])}")
        for i in idx
    ]


class HostBound(GpuRule):
    id = "host-bound"
    title = "Kernels wait for the host"
    thresholds = {"max_host_wait_share": 0.30, "kernel_wait_us": 30.0}
    fix = (
        "The GPU runs out of queued work because the host launches too slowly: use fewer, larger ops "
        "(operator fusion, torch.compile), CUDA graphs to replay launches, or a larger batch."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        idle = _idle(ctx, float(thresholds["kernel_wait_us"]))
        got = _stream_share(ctx, idle, HOST_WAIT)
        width, of = _width(ctx)
        if got is None or width <= 0:
            return []
        stream, host_wait, sel = got
        share = host_wait / width
        if share <= float(thresholds["max_host_wait_share"]):
            return []
        counts: dict[str, float] = {"host_wait_gaps": int(sel.sum()), "host_wait_us": host_wait}
        for s in idle.streams:
            counts[f"host_wait_share_stream_{s.stream}"] = s.host_wait_us / width
        return [
            self.finding(
                ctx,
                f"compute stream {stream} waits for kernel launches {share:.1%} of the {of}",
                time_lost_us=host_wait,
                share=share,
                counts=counts,
                examples=_gap_examples(idle, sel, "host_wait gap"),
            )
        ]


class LaunchOverhead(GpuRule):
    id = "launch-overhead"
    title = "Many tiny gaps between back-to-back kernels"
    thresholds = {"kernel_wait_us": 30.0, "min_share": 0.05}
    fix = (
        "Kernels are queued but each launch still costs a few µs of GPU idle: capture the step with CUDA graphs "
        "(torch.compile mode='reduce-overhead') or fuse small ops."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        limit = float(thresholds["kernel_wait_us"])
        idle = _idle(ctx, limit)
        got = _stream_share(ctx, idle, KERNEL_WAIT)
        width, of = _width(ctx)
        if got is None or width <= 0:
            return []
        stream, kw, sel = got
        share = kw / width
        if share < float(thresholds["min_share"]):
            return []
        n = int(sel.sum())
        return [
            self.finding(
                ctx,
                f"compute stream {stream}: {n} gaps under {limit:.0f} µs between queued kernels add up to "
                f"{share:.1%} of the {of}",
                time_lost_us=kw,
                share=share,
                counts={"gaps": n, "mean_gap_us": kw / max(n, 1)},
                examples=_gap_examples(idle, sel, "kernel_wait gap"),
            )
        ]

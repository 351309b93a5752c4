"""host-bound and launch-overhead: per-stream idle split into host_wait / kernel_wait / other (HTA)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ._common import GpuRule, busiest_stream, stream_gaps
from .base import Example, Finding, ThresholdValue
from .context import RuleContext

__all__ = ["HostBound", "LaunchOverhead"]


def _per_stream(streams: np.ndarray, values: np.ndarray) -> dict[int, float]:
    u, inv = np.unique(streams, return_inverse=True)
    sums = np.bincount(inv, weights=values, minlength=u.shape[0])
    return {int(s): float(v) for s, v in zip(u, sums, strict=True)}


def _gap_examples(ctx: RuleContext, gaps, sel: np.ndarray, label: str) -> list[Example]:
    idx = np.flatnonzero(sel)
    idx = idx[np.argsort(-gaps.gap[idx], kind="stable")][:3]
    return [Example(label, float(gaps.gap_start[i]), float(gaps.gap[i]), f"stream {int(gaps.stream[i])}") for i in idx]


class HostBound(GpuRule):
    id = "host-bound"
    title = "Kernels wait for the host"
    thresholds: Mapping[str, ThresholdValue] = {"max_host_wait_share": 0.30, "kernel_wait_us": 30.0}
    fix = (
        "The GPU runs out of queued work because the host launches too slowly: use fewer, larger ops "
        "(operator fusion, torch.compile), CUDA graphs to replay launches, or a larger batch."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        gaps = stream_gaps(ctx, float(thresholds["kernel_wait_us"]))
        span = ctx.gpu_span
        if span is None or not gaps.gap.shape[0]:
            return []
        width = ctx.window_us if ctx.steps else span[1] - span[0]
        if width <= 0:
            return []
        host = _per_stream(gaps.stream, np.where(gaps.host_wait, gaps.gap, 0.0))
        # judge the compute stream: side streams (NCCL, copies) idle by design while compute runs
        worst = busiest_stream(ctx)
        if worst not in host:
            return []
        share = host[worst] / width
        if share <= float(thresholds["max_host_wait_share"]):
            return []
        counts = {f"host_wait_share_stream_{s}": v / width for s, v in sorted(host.items())}
        counts["host_wait_gaps"] = int(gaps.host_wait.sum())
        return [
            self.finding(
                ctx,
                f"compute stream {worst} waits for kernel launches {share:.1%} of the GPU span",
                time_lost_us=host[worst],
                share=share,
                counts=counts,
                examples=_gap_examples(ctx, gaps, gaps.host_wait & (gaps.stream == worst), "host_wait gap"),
            )
        ]


class LaunchOverhead(GpuRule):
    id = "launch-overhead"
    title = "Many tiny gaps between back-to-back kernels"
    thresholds: Mapping[str, ThresholdValue] = {"kernel_wait_us": 30.0, "min_share": 0.05}
    fix = (
        "Kernels are queued but each launch still costs a few µs of GPU idle: capture the step with CUDA graphs "
        "(torch.compile mode='reduce-overhead') or fuse small ops."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        gaps = stream_gaps(ctx, float(thresholds["kernel_wait_us"]))
        span = ctx.gpu_span
        if span is None or not gaps.gap.shape[0]:
            return []
        width = ctx.window_us if ctx.steps else span[1] - span[0]
        kw = _per_stream(gaps.stream, np.where(gaps.kernel_wait, gaps.gap, 0.0))
        worst = busiest_stream(ctx)
        if worst not in kw:
            return []
        share = kw[worst] / width if width > 0 else 0.0
        if share < float(thresholds["min_share"]):
            return []
        n = int((gaps.kernel_wait & (gaps.stream == worst)).sum())
        return [
            self.finding(
                ctx,
                f"stream {worst}: {n} gaps under {float(thresholds['kernel_wait_us']):.0f} µs between queued "
                f"kernels add up to {share:.1%} of the GPU span",
                time_lost_us=kw[worst],
                share=share,
                counts={"gaps": n, "mean_gap_us": kw[worst] / max(n, 1)},
                examples=_gap_examples(ctx, gaps, gaps.kernel_wait & (gaps.stream == worst), "kernel_wait gap"),
            )
        ]

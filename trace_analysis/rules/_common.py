"""Small helpers shared by rules: a base class with the finding factory, GPU launch joins, stream gaps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..model import Events
from .base import Evidence, Example, Finding, Severity, Skip, ThresholdValue, severity_for_share
from .context import RuleContext
from .intervals import total

__all__ = [
    "BaseRule",
    "GpuRule",
    "NO_GPU",
    "StreamGaps",
    "busiest_stream",
    "gpu_utilization",
    "launch_join",
    "stream_gaps",
]

NO_GPU = Skip("not applicable (no GPU activity)", None)


class BaseRule:
    """Shared plumbing: ``id``, ``title``, ``thresholds`` and ``fix`` are class attributes of each rule."""

    id: ClassVar[str]
    title: ClassVar[str]
    fix: ClassVar[str]
    thresholds: ClassVar[Mapping[str, ThresholdValue]] = {}
    cross_rank: ClassVar[bool] = False

    def applies(self, ctx: RuleContext) -> Skip | None:
        return None

    def finding(
        self,
        ctx: RuleContext,
        title: str,
        *,
        time_lost_us: float = 0.0,
        counts: Mapping[str, float] | None = None,
        examples: Sequence[Example] = (),
        severity: Severity | None = None,
        floor: Severity = Severity.LOW,
        cap: Severity = Severity.HIGH,
        fix: str | None = None,
        share: float | None = None,
    ) -> Finding:
        if share is None:
            share = ctx.share(time_lost_us) if time_lost_us > 0 else None
        sev = severity if severity is not None else severity_for_share(share, floor=floor)
        if sev.rank > cap.rank:
            sev = cap
        return Finding(
            rule_id=self.id,
            severity=sev,
            title=title,
            evidence=Evidence(
                time_lost_us=float(time_lost_us),
                share=None if share is None else float(share),
                counts={k: float(v) for k, v in (counts or {}).items()},
                examples=tuple(examples),
            ),
            fix=fix or self.fix,
            rank=ctx.rank,
        )


class GpuRule(BaseRule):
    """A rule about GPU activity: not applicable to CPU-only traces."""

    def applies(self, ctx: RuleContext) -> Skip | None:
        return None if ctx.has_gpu else NO_GPU


def launch_join(ctx: RuleContext, gpu: Events) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``ctx.runtime`` that launched each GPU row (joined by correlation id), and a found mask."""

    def compute() -> tuple[np.ndarray, np.ndarray]:
        rt = ctx.runtime
        n = len(gpu)
        if not n or not len(rt):
            return np.full(n, -1, np.int64), np.zeros(n, bool)
        valid = np.flatnonzero(rt.correlation >= 0)
        order = valid[np.argsort(rt.correlation[valid], kind="stable")]
        keys = rt.correlation[order]
        pos = np.clip(np.searchsorted(keys, gpu.correlation), 0, max(keys.shape[0] - 1, 0))
        found = (gpu.correlation >= 0) & (keys.shape[0] > 0) & (keys[pos] == gpu.correlation)
        return np.where(found, order[pos], -1), found

    return ctx.trace.cached(("rules.launch_join", id(gpu)), compute)


@dataclass(frozen=True)
class StreamGaps:
    """Idle gaps between consecutive GPU events of each stream (HTA's idle-time split).

    ``gap[i]`` precedes GPU row ``row[i]``; ``host_wait``: the launch of that row began after the previous row
    on the stream ended (the GPU waited for the host); ``kernel_wait``: a short gap (< ``kernel_wait_us``) that
    is not host_wait (launch overhead between back-to-back kernels); the rest is ``other``.
    """

    row: np.ndarray
    stream: np.ndarray
    gap_start: np.ndarray
    gap: np.ndarray
    host_wait: np.ndarray
    kernel_wait: np.ndarray


def stream_gaps(ctx: RuleContext, kernel_wait_us: float) -> StreamGaps:
    def compute() -> StreamGaps:
        g = ctx.gpu_activity
        launch, found = launch_join(ctx, g)
        dev = ctx.gpu_device_of(g)
        stream = np.where(g.stream >= 0, g.stream, g.tid).astype(np.int64)
        key = dev * (1 << 32) + stream
        order = np.lexsort((g.ts, key))
        k, ts, end = key[order], g.ts[order], g.end[order]
        same = np.r_[False, k[1:] == k[:-1]]
        # running max of ends, restarted per stream (one slice per stream: a handful)
        seg_start = np.flatnonzero(~same)
        run = end.copy()
        for a, b in zip(seg_start, np.r_[seg_start[1:], len(end)], strict=False):
            run[a:b] = np.maximum.accumulate(end[a:b])
        prev_end = np.r_[-np.inf, run[:-1]]
        gap = ts - prev_end
        sel = same & (gap > 0)
        rows = order[sel]
        rt = ctx.runtime
        l_rows = launch[rows]
        l_found = found[rows]
        l_start = np.where(l_found, rt.ts[np.maximum(l_rows, 0)] if len(rt) else 0.0, -np.inf)
        host_wait = l_start > prev_end[sel]
        kernel_wait = ~host_wait & (gap[sel] < kernel_wait_us)
        return StreamGaps(rows, k[sel] & 0xFFFFFFFF, prev_end[sel], gap[sel], host_wait, kernel_wait)

    return ctx.trace.cached(("rules.stream_gaps", kernel_wait_us), compute)


def gpu_utilization(ctx: RuleContext) -> float:
    """Union of GPU activity ÷ the GPU span (first to last GPU activity), all devices together."""

    def compute() -> float:
        span = ctx.gpu_span
        if span is None or span[1] <= span[0]:
            return 0.0
        g = ctx.gpu_activity
        return total(g.ts, g.end) / (span[1] - span[0])

    return float(ctx.trace.cached(("rules.gpu_utilization",), compute))


def busiest_stream(ctx: RuleContext) -> int | None:
    """The stream with the most GPU time (the compute stream in almost every training job)."""
    g = ctx.gpu_activity
    if not len(g):
        return None
    stream = np.where(g.stream >= 0, g.stream, g.tid).astype(np.int64)
    u, inv = np.unique(stream, return_inverse=True)
    return int(u[int(np.argmax(np.bincount(inv, weights=g.dur)))])

"""Small helpers shared by rules: a base class with the finding factory, GPU utilization, the compute stream,
and the window the GPU-side rules count in (with the analyses' scope that covers it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

import msgspec
import numpy as np

from ..analyses.arrays import unique_inverse
from ..analyses.gpu import KernelType, device_groups, device_of, gpu_scope, kernel_types
from ..analyses.intervals import clip, union_length
from .base import Evidence, Example, Finding, Severity, Skip, ThresholdValue, severity_for_share
from .context import RuleContext

__all__ = [
    "BaseRule",
    "GpuBound",
    "GpuRule",
    "NO_GPU",
    "gpu_bound",
    "busiest_stream",
    "clip",
    "compute_streams",
    "gpu_utilization",
    "gpu_share_of",
    "gpu_window",
    "whole_window_scope",
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
        share_of: str | None = None,
        basis: str | None = None,
        no_loss_reason: str | None = None,
    ) -> Finding:
        """``basis``: what ``time_lost_us`` measures (``Evidence.time_lost_basis``); ``no_loss_reason``: why there
        is none, when ``time_lost_us`` is 0 by judgement rather than unmeasurable (ignored when it is > 0)."""
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
                counts={k: _count_value(v) for k, v in (counts or {}).items()},
                examples=tuple(examples),
                share_of=share_of,
                time_lost_basis=basis,
                no_time_lost_reason=no_loss_reason if time_lost_us <= 0 else None,
            ),
            fix=fix or self.fix,
            rank=ctx.rank,
        )


def _count_value(v: float) -> float:
    """An evidence count as the JSON report writes it: integers (numpy's too) stay integers ("copies": 16, as
    documented, not 16.0), anything else is a float."""
    if isinstance(v, (int, np.integer)):
        return int(v)
    return float(v)


class GpuRule(BaseRule):
    """A rule about GPU activity: not applicable to CPU-only traces."""

    def applies(self, ctx: RuleContext) -> Skip | None:
        return None if ctx.has_gpu else NO_GPU


def gpu_utilization(ctx: RuleContext) -> float:
    """Union of GPU activity ÷ the GPU span (first to last GPU activity); with several devices, the mean of each
    device's union over that span (one GPU busy while the other idles is 50%, not 100%)."""

    def compute() -> float:
        span = ctx.gpu_span
        if span is None or span[1] <= span[0]:
            return 0.0
        busy = ctx.device_busy
        if len(busy) == 1:
            g = ctx.gpu_activity
            return union_length(g.ts, g.end) / (span[1] - span[0])
        return sum(float((e - s).sum()) for s, e, _, _ in busy.values()) / len(busy) / (span[1] - span[0])

    return float(ctx.trace.cached(("rules.gpu_utilization",), compute))


class GpuBound(msgspec.Struct, frozen=True):
    """Whether the GPU is the bottleneck (busy at least ``limit`` of its span), for the rules that count host
    time on the launch path (short-kernels, slow-runtime-calls) or judge launch delays (launch-queue).

    When the GPU is saturated the host runs ahead of it and waits on a full launch queue: host time spent
    launching (short kernels, slow launch calls) is hidden behind GPU work and costs the job nothing, so those
    rules report no time lost then (``host_cost``), cap their severity at info and say why."""

    utilization: float
    limit: float

    @property
    def bound(self) -> bool:
        return self.utilization >= self.limit

    @property
    def label(self) -> str:
        """For titles: "GPU busy 98%"."""
        return f"GPU busy {self.utilization:.0%}"

    def host_cost(self, host_us: float) -> float:
        """Time lost for ``host_us`` of host time on the launch path: all of it, or none when GPU-bound."""
        return 0.0 if self.bound else host_us

    def no_loss_reason(self, what: str) -> str | None:
        """``Evidence.no_time_lost_reason`` when GPU-bound ("GPU busy 98% (GPU-bound): <what>"), else None."""
        return f"{self.label} (GPU-bound): {what}" if self.bound else None

    @property
    def cap(self) -> Severity:
        """The highest severity a host-time symptom may have: info when GPU-bound (expected there)."""
        return Severity.INFO if self.bound else Severity.HIGH


def gpu_bound(ctx: RuleContext, limit: float) -> GpuBound:
    """The GPU utilization (``gpu_utilization``) against a rule's ``gpu_bound_util`` threshold."""
    return GpuBound(gpu_utilization(ctx), limit)


def compute_streams(ctx: RuleContext) -> dict[int, int]:
    """The compute stream of each GPU device (ascending devices): the stream with the most time in computation
    kernels (HTA's COMPUTATION type), else, when the device has none, its stream with the most GPU time. Streams
    are per device (two devices can both have a stream 7). Cached on the trace (host-bound, launch-overhead and
    low-gpu-util ask).

    Computation only: in a DDP job the NCCL stream can hold more GPU time than the compute stream (trace_filter:
    communication 33% of the GPU span, compute 18%), and its idle gaps wait for gradients, not for launches."""

    def compute() -> dict[int, int]:
        g = ctx.gpu_activity
        if not len(g):
            return {}
        stream = np.where(g.stream >= 0, g.stream, g.tid).astype(np.int64)
        dur = g.dur  # a sub-table's column: gathered on each read
        comp = np.where(kernel_types(ctx.trace, g) == KernelType.COMPUTATION.value, dur, 0.0)
        out: dict[int, int] = {}
        devices = list(ctx.device_busy)  # cached: the low-gpu-util and the report's timeline read it
        groups = device_groups(device_of(g)) if len(devices) > 1 else [(devices[0], None)]
        for d, sel in groups:
            d_stream, weight, d_dur = (stream, comp, dur) if sel is None else (stream[sel], comp[sel], dur[sel])
            u, inv = unique_inverse(d_stream)
            if not weight.any():  # only copies / communication: judge the busiest stream of those
                weight = d_dur
            out[d] = int(u[int(np.bincount(inv, weights=weight).argmax())])
        return out

    got: dict[int, int] = ctx.trace.cached(("rules.compute_streams",), compute)
    return got


def busiest_stream(ctx: RuleContext) -> int | None:
    """The compute stream (``compute_streams``) of the first device, the only one of a one-GPU trace (cached)."""

    def compute() -> int | None:
        streams = compute_streams(ctx)
        return next(iter(streams.values())) if streams else None

    got: int | None = ctx.trace.cached(("rules.busiest_stream",), compute)
    return got


def whole_window_scope(ctx: RuleContext) -> bool:
    """``include_last_step`` for the shared GPU analyses a rule clips to the window.

    The analyses follow HTA's scope: with two or more steps, only GPU rows launched before the last step's
    *start* (and every row before the first step). A rule counts the rows inside its window, the last step
    included, so it asks for the rows launched up to the last step's end and clips them. Without that windowing
    both scopes are every row: False then shares the analyses the report already computed."""
    return gpu_scope(ctx.trace).windowed


def gpu_window(ctx: RuleContext) -> tuple[float, float, str]:
    """(start, end, name) of the window the rules about GPU time count in and divide by: the profiler steps when
    the trace has some (``ctx.window``, the window of every other rule), else the GPU span (HTA's span): then
    their findings say so (``share_of``)."""
    if ctx.steps:
        lo, hi = ctx.window
        return lo, hi, ctx.window_name
    span = ctx.gpu_span
    return (span[0], span[1], "GPU span") if span else (0.0, 0.0, "GPU span")


def gpu_share_of(ctx: RuleContext) -> str | None:
    """``Evidence.share_of`` of the findings that divide by ``gpu_window`` (or a device's GPU span): None, the
    analysed window, when the trace has steps."""
    return None if ctx.steps else "GPU span"

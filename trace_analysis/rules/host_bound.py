"""host-bound and launch-overhead: per-stream idle split into host_wait / kernel_wait / other.

Both read ``analyses.idle_time.idle_time_breakdown`` (HTA's definitions) and judge the compute stream (the
stream with the most time in computation kernels, ``compute_streams``): side streams (NCCL, copies) idle by
design while compute runs. They count the gaps' parts inside the window they divide by (``gpu_window``: the
profiler steps, else the GPU span). With several GPUs in the trace each device's compute stream is judged on its
own (a finding per device, titled "GPU d compute stream s"): streams are per device.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
import numpy as np

from ..analyses.arrays import flatnonzero, unique_inverse
from ..analyses.idle_time import HOST_WAIT, KERNEL_WAIT, OTHER, IdleTimeBreakdown, idle_time_breakdown
from ..analyses.intervals import coverage_within
from ._common import GpuRule, clip, compute_streams, gpu_share_of, gpu_window, whole_window_scope
from .base import Example, Finding, Share, ThresholdValue, count_of, severity_for_share
from .context import RuleContext
from .host_activity import gap_note
from .startup import startup_calls, startup_part

__all__ = ["HostBound", "LaunchOverhead", "ComputeStreamIdle", "compute_stream_idle"]


def _idle(ctx: RuleContext, kernel_wait_us: float) -> IdleTimeBreakdown:
    # cached on the trace; every row launched up to the window's end, clipped to it below
    return idle_time_breakdown(
        ctx.trace, consecutive_kernel_delay_us=kernel_wait_us, include_last_step=whole_window_scope(ctx)
    )


class _Gaps(msgspec.Struct, frozen=True):
    """The idle gaps of one category, cut to the window: per gap its stream, device, start and length there."""

    stream: int  # the compute stream
    device: int  # its device
    several: bool  # whether the trace has several devices (titles and keys name the device then)
    width: float  # the window's length
    of: str  # its name, for the title
    gap_stream: np.ndarray
    gap_device: np.ndarray
    start: np.ndarray
    length: np.ndarray
    on_compute: np.ndarray  # mask: the compute stream's gaps

    @property
    def total(self) -> float:
        return float(self.length[self.on_compute].sum())

    @property
    def label(self) -> str:
        """ "compute stream 7", or "GPU 1 compute stream 7" in a trace of several devices."""
        return f"GPU {self.device} compute stream {self.stream}" if self.several else f"compute stream {self.stream}"

    def per_stream(self) -> dict[str, float]:
        """The gaps' time per stream of the compute stream's device, by count key suffix ("7", or "gpu1_7")."""
        stream, length = self.gap_stream, self.length
        if self.several:
            mine = self.gap_device == self.device
            stream, length = stream[mine], length[mine]
        u, inv = unique_inverse(stream)
        times = np.bincount(inv, weights=length, minlength=u.shape[0]).tolist()
        prefix = f"gpu{self.device}_" if self.several else ""
        return {f"{prefix}{s}": t for s, t in zip(u.tolist(), times, strict=True)}

    def examples(self, ctx: RuleContext, label: str, notes: bool) -> list[Example]:
        """The longest gaps on the compute stream; with ``notes``, what the launching thread did in the longest
        (one note: the others are mostly the same loop's next iterations, and each costs ~0.1 ms)."""
        idx = flatnonzero(self.on_compute)
        idx = idx[(-self.length[idx]).argsort(kind="stable")][:3]
        out: list[Example] = []
        where = f"GPU {self.device} stream" if self.several else "stream"
        for i in idx.tolist():
            start, length, stream = float(self.start[i]), float(self.length[i]), int(self.gap_stream[i])
            note = (
                gap_note(ctx, start, start + length, stream, self.device if self.several else None)
                if notes and not out
                else None
            )
            out.append(Example(label, start, length, f"{where} {stream}", note=note))
        return out


def _gaps(ctx: RuleContext, idle: IdleTimeBreakdown, category: int) -> list[_Gaps]:
    """Per device, the gaps of ``category`` inside the window (the steps, else the GPU span: ``gpu_window``); none
    when there is no compute stream or no window. A gap crossing the window's edge counts its part inside."""
    streams = compute_streams(ctx)
    lo, hi, of = gpu_window(ctx)
    if not streams or hi <= lo:
        return []
    of_cat = idle.gap_category == category
    start, end = clip(idle.gap_start[of_cat], idle.gap_start[of_cat] + idle.gap_us[of_cat], lo, hi)
    length = end - start
    inside = length > 0
    gap_stream = idle.gap_stream[of_cat][inside]
    start, length = start[inside], length[inside]
    several = len(streams) > 1
    # with one device its gaps are all the device's (``_Gaps`` reads the devices only when ``several``)
    gap_device = idle.gap_device[of_cat][inside] if several else idle.gap_device[:0]
    out = []
    for device, stream in streams.items():
        on = gap_stream == stream
        if several:
            on &= gap_device == device
        out.append(_Gaps(stream, device, several, hi - lo, of, gap_stream, gap_device, start, length, on))
    return out


class ComputeStreamIdle(msgspec.Struct, frozen=True):
    """The compute stream's idle gaps inside ``gpu_window`` by category (HTA's split), µs."""

    stream: int
    host_wait_us: float  # the launch came after the previous row ended: the GPU waited for the host
    kernel_wait_us: float  # short gaps between queued rows
    other_us: float  # longer gaps with the next row already launched: waits on other streams or events
    # the same split of the gaps' parts during which the whole device idles (``compute_stream_idle`` given the
    # device's busy intervals): what the GPU's idle time waits for. The stream's own split also holds the time it
    # waits while other streams run (a DDP compute stream waiting for its NCCL kernels: GPU busy, not idle).
    while_gpu_idle: ComputeStreamIdle | None = None

    @property
    def total_us(self) -> float:
        return self.host_wait_us + self.kernel_wait_us + self.other_us


def compute_stream_idle(
    ctx: RuleContext,
    kernel_wait_us: float = 30.0,
    busy: tuple[np.ndarray, np.ndarray] | None = None,
    device: int | None = None,
) -> ComputeStreamIdle | None:
    """Why the compute stream of ``device`` (default: the first) idles (low-gpu-util's diagnosis), from the same
    cached idle split as host-bound; with ``busy`` (the device's sorted disjoint busy intervals), also the split of
    the parts while the GPU idles."""
    streams = compute_streams(ctx)
    if device is None and streams:
        device = next(iter(streams))
    stream = streams.get(device) if device is not None else None
    lo, hi, _ = gpu_window(ctx)
    if stream is None or hi <= lo:
        return None
    idle = _idle(ctx, kernel_wait_us)
    on = idle.gap_stream == stream  # one pass over the compute stream's gaps (``_gaps`` per category: three)
    if len(streams) > 1:
        on &= idle.gap_device == device
    start, end = clip(idle.gap_start[on], idle.gap_start[on] + idle.gap_us[on], lo, hi)
    length = end - start
    cat = idle.gap_category[on]
    by_cat = np.bincount(cat, weights=length, minlength=3).tolist()
    while_idle = None
    if busy is not None:
        free_us = length - coverage_within(busy[0], busy[1], start, end)  # minus the busy time inside each gap
        free = np.bincount(cat, weights=free_us, minlength=3).tolist()
        while_idle = ComputeStreamIdle(stream, free[HOST_WAIT], free[KERNEL_WAIT], free[OTHER])
    return ComputeStreamIdle(stream, by_cat[HOST_WAIT], by_cat[KERNEL_WAIT], by_cat[OTHER], while_idle)


class HostBound(GpuRule):
    id = "host-bound"
    title = "Kernels wait for the host"
    thresholds = {"max_host_wait_share": Share(0.30), "kernel_wait_us": 30.0, "min_startup_share": Share(0.5)}
    fix = (
        "The GPU runs out of queued work because the host launches too slowly: use fewer, larger ops "
        "(operator fusion, torch.compile), CUDA graphs to replay launches, or a larger batch."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        idle = _idle(ctx, float(thresholds["kernel_wait_us"]))
        out = []
        for gaps in _gaps(ctx, idle, HOST_WAIT):
            host_wait = gaps.total
            share = host_wait / gaps.width
            if share <= float(thresholds["max_host_wait_share"]):
                continue
            counts: dict[str, float] = {"host_wait_gaps": int(gaps.on_compute.sum()), "host_wait_us": host_wait}
            per_stream = gaps.per_stream()
            prefix = f"gpu{gaps.device}_" if gaps.several else ""
            for s in idle.streams:
                if s.device == gaps.device:
                    key = f"{prefix}{s.stream}"
                    counts[f"host_wait_share_stream_{key}"] = per_stream.get(key, 0.0) / gaps.width
            on = gaps.on_compute
            during = startup_calls(ctx).overlap(gaps.start[on], gaps.start[on] + gaps.length[on])
            startup = startup_part(ctx, host_wait, during, float(thresholds["min_startup_share"]))
            counts.update(startup.counts())
            out.append(
                self.finding(
                    ctx,
                    f"{gaps.label} waits for kernel launches {share:.1%} of the {gaps.of}" + startup.title("this wait"),
                    time_lost_us=host_wait,
                    share=share,
                    share_of=gpu_share_of(ctx),
                    counts=counts,
                    examples=gaps.examples(ctx, "host_wait gap", notes=True),
                    fix=startup.fix(self.fix),
                    # mostly start-up (once per process): rated on the rest, what the steps would lose
                    severity=severity_for_share(startup.rest_us / gaps.width) if startup.dominant else None,
                )
            )
        return out


class LaunchOverhead(GpuRule):
    id = "launch-overhead"
    title = "Many tiny gaps between back-to-back kernels"
    thresholds = {"kernel_wait_us": 30.0, "min_share": Share(0.05)}
    fix = (
        "Kernels are queued but each launch still costs a few µs of GPU idle: capture the step with CUDA graphs "
        "(torch.compile mode='reduce-overhead') or fuse small ops."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        limit = float(thresholds["kernel_wait_us"])
        out = []
        for gaps in _gaps(ctx, _idle(ctx, limit), KERNEL_WAIT):
            kw = gaps.total
            share = kw / gaps.width
            if share < float(thresholds["min_share"]):
                continue
            n = int(gaps.on_compute.sum())
            out.append(
                self.finding(
                    ctx,
                    f"{gaps.label}: {count_of(n, 'gap')} under {limit:.0f} µs between queued kernels "
                    f"add up to {share:.1%} of the {gaps.of}",
                    time_lost_us=kw,
                    share=share,
                    share_of=gpu_share_of(ctx),
                    counts={"gaps": n, "mean_gap_us": kw / max(n, 1)},
                    examples=gaps.examples(ctx, "kernel_wait gap", notes=False),
                )
            )
        return out

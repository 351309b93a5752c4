"""low-gpu-util and gpu-starvation: how much of the window the GPU is busy, and long idle gaps."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from msgspec.structs import replace

from ..analyses.arrays import flatnonzero, linspace, readonly
from ..analyses.intervals import coverage_before
from ..units import fmt_us
from ._common import GpuRule, gpu_share_of
from .base import Example, Finding, Severity, Share, ThresholdValue, count_of, severity_for_share
from .context import RuleContext
from .host_activity import gap_note
from .host_bound import compute_stream_idle
from .startup import startup_calls, startup_part

__all__ = ["LowGpuUtil", "GpuStarvation", "utilization_timeline"]


def utilization_timeline(ctx: RuleContext, bins: int = 30) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per device: (bin edges µs, busy fraction per bin) of the union of GPU activity over the window. Cached on
    the trace, arrays read-only: low-gpu-util and the report's timeline ask for the same bins."""
    got: dict[int, tuple[np.ndarray, np.ndarray]] = ctx.trace.cached(
        ("rules.utilization_timeline", bins), lambda: _utilization_timeline(ctx, bins)
    )
    return got


def _utilization_timeline(ctx: RuleContext, bins: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    # Steps when present; else the rank's GPU span, first to last activity of any device (HTA's temporal-breakdown
    # span; with one device its own): every device over the same window, so that a GPU idle while another
    # works shows as idle (its own first-to-last activity would leave out the time before it started).
    span = ctx.gpu_span
    for d, (s, e, _, _) in ctx.device_busy.items():
        lo, hi = ctx.window if ctx.steps or span is None else span
        if hi <= lo:
            continue
        edges = linspace(lo, hi, bins + 1)
        cov = coverage_before(s, e, edges)
        busy = cov[1:] - cov[:-1]  # np.diff
        widths = edges[1:] - edges[:-1]
        # A window of a few µs on an epoch-µs clock (float64 steps by 0.25 µs at 1.7e15) has zero-width bins:
        # 0 there, not 0/0 = NaN (a RuntimeWarning, "nan" in the HTML plot, a NaN overall utilization).
        util = np.divide(busy, widths, out=np.zeros_like(busy), where=widths > 0)
        # np.clip(x, 0, 1) as its two ufuncs (same values)
        util = np.minimum(np.maximum(util, 0.0), 1.0)
        readonly(edges, util)
        out[d] = (edges, util)
    return out


class LowGpuUtil(GpuRule):
    id = "low-gpu-util"
    title = "GPU mostly idle"
    thresholds = {"min_util": Share(0.5), "chunks": 30, "min_low_chunks": 3, "min_startup_share": Share(0.5)}
    fix = (
        "Find what the host does while the GPU idles (data loading, synchronizations, Python overhead) during the "
        "chunks in the examples; overlap input loading with compute (DataLoader workers, pin_memory); raise the "
        "batch size."
    )
    # when the compute stream idles with its next work already launched (HTA's "other" idle), the host is not
    # what it waits for (negative_queue: 582 ms of its 693 ms GPU idle, none waiting for launches, a queue 946 deep)
    queued_fix = (
        "The GPU idles with work already queued: the compute stream waits for other streams or events (a "
        "communication or copy it depends on, cudaStreamWaitEvent), not for the host. Look at what the other "
        "streams run just before the idle chunks in the examples: overlap communication with compute (see "
        "exposed-comm: bucket sizes, prefetching), start copies earlier (pinned memory, non_blocking=True), and "
        "avoid host synchronizations that serialize the streams."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        min_util = float(thresholds["min_util"])
        chunks = max(int(thresholds["chunks"]), 1)
        out = []
        # the window utilization_timeline divides by: the steps, else the (rank's) GPU span
        busy = ctx.device_busy
        of = f"the {ctx.window_name}" if ctx.steps else ("its GPU span" if len(busy) == 1 else "the GPU span")
        for dev, (edges, util) in utilization_timeline(ctx, chunks).items():
            width = float(edges[-1] - edges[0])
            widths = edges[1:] - edges[:-1]  # np.diff(edges)
            overall = float((util * widths).sum() / width)
            idle = width * (1.0 - overall)
            low = flatnonzero((util < min_util) & (widths > 0))  # a zero-width bin shows no utilization
            examples = [
                Example("low-utilization chunk", float(edges[i]), float(edges[i + 1] - edges[i]), f"GPU {dev}")
                for i in low[util[low].argsort(kind="stable")][:3]
            ]
            counts = {"utilization": overall, "idle_us": idle, "window_us": width, "low_chunks": len(low)}
            if overall < min_util:
                why, fix = "", None
                b_s, b_e, _, _ = busy[dev]
                split = compute_stream_idle(ctx, busy=(b_s, b_e), device=dev)
                if split is not None and split.total_us > 0 and split.while_gpu_idle is not None:
                    counts["compute_stream_host_wait_us"] = split.host_wait_us
                    counts["compute_stream_queued_idle_us"] = split.other_us
                    # judged on the GPU's idle time (this finding's): the stream's own idle also holds its waits
                    # while other streams run (trace_filter: 60% queued, but 45% of the GPU's idle time)
                    gpu_idle = split.while_gpu_idle
                    counts["gpu_idle_host_wait_us"] = gpu_idle.host_wait_us
                    counts["gpu_idle_queued_us"] = gpu_idle.other_us
                    if idle > 0 and gpu_idle.other_us >= 0.5 * idle:
                        queued = gpu_idle.other_us / idle
                        of_gpu = "" if len(busy) == 1 else f" of GPU {dev}"
                        why = (
                            f"; compute stream {split.stream}{of_gpu} has work queued during {queued:.0%} of the idle "
                            "time (waiting on other streams or events, not the host)"
                        )
                        fix = self.queued_fix
                # the idle time during CUDA start-up calls (context creation, first launches: module loading)
                lo, hi = float(edges[0]), float(edges[-1])
                startup = startup_part(
                    ctx, idle, startup_calls(ctx).idle_in(b_s, b_e, lo, hi), float(thresholds["min_startup_share"])
                )
                counts.update(startup.counts())
                out.append(
                    self.finding(
                        ctx,
                        f"GPU {dev} busy only {overall:.1%} of {of} (threshold {min_util:.0%}){why}"
                        + startup.title("the idle time"),
                        fix=startup.fix(fix or self.fix),
                        time_lost_us=idle,
                        share=1.0 - overall,
                        share_of=gpu_share_of(ctx),
                        counts=counts,
                        examples=examples,
                        # mostly start-up (once per process): rated on the rest, what the steps would lose
                        severity=severity_for_share(startup.rest_us / width) if startup.dominant else None,
                    )
                )
            elif len(low) >= int(thresholds["min_low_chunks"]):
                # Busy overall but idle phases: cost = idle time inside the low chunks.
                lost = float(((1.0 - util[low]) * widths[low]).sum())
                out.append(
                    self.finding(
                        ctx,
                        f"GPU {dev} idle phases: {len(low)} of {chunks} chunks below {min_util:.0%} utilization",
                        time_lost_us=lost,
                        share=lost / width,
                        share_of=gpu_share_of(ctx),
                        counts=counts,
                        examples=examples,
                        cap=Severity.MEDIUM,
                    )
                )
        return out


class GpuStarvation(GpuRule):
    id = "gpu-starvation"
    title = "Long GPU idle gaps"
    thresholds = {"min_gap_us": 500_000.0, "min_startup_share": Share(0.5)}
    fix = (
        "Look at what the host does during the gaps listed (their start times are in the examples): data "
        "loading, checkpointing, synchronizations or Python work; overlap it with GPU work or move it off the "
        "training thread."
    )

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]:
        min_gap = float(thresholds["min_gap_us"])
        lo, hi = ctx.window
        out = []
        busy = ctx.device_busy
        span = ctx.gpu_span
        for d, (s, e, _, _) in busy.items():
            if len(busy) > 1 and span is not None:
                # several GPUs: a device also idles from the rank's first GPU activity to its own first, and from
                # its own last to the rank's last (the utilization timeline's span; with one GPU both are empty)
                s = np.concatenate(([span[0]], s, [span[1]]))
                e = np.concatenate(([span[0]], e, [span[1]]))
            # the part of each gap inside the window: idle time after the last step (a checkpoint, the profiler
            # flushing) is not the loop's cost, and a share of the window cannot exceed it
            gap_start = np.maximum(e[:-1], lo)
            gaps = np.minimum(s[1:], hi) - gap_start
            big = flatnonzero(gaps > min_gap)
            if not big.shape[0]:
                continue
            lost = float(gaps[big].sum())
            order = big[(-gaps[big]).argsort(kind="stable")]
            # the longest gap says what the host did meanwhile (one note: each costs ~0.1 ms)
            examples = [
                Example("GPU idle gap", float(gap_start[i]), float(gaps[i]), f"GPU {int(d)}") for i in order[:3]
            ]
            first = examples[0]
            examples[0] = replace(first, note=gap_note(ctx, first.ts_us, first.ts_us + first.dur_us, device=int(d)))
            during = startup_calls(ctx).overlap(gap_start[big], gap_start[big] + gaps[big])
            startup = startup_part(ctx, lost, during, float(thresholds["min_startup_share"]))
            out.append(
                self.finding(
                    ctx,
                    f"GPU {int(d)} idle {count_of(len(big), 'time')} for more than {fmt_us(min_gap)} "
                    f"(longest {fmt_us(float(gaps[order[0]]))})" + startup.title("these gaps"),
                    time_lost_us=lost,
                    counts={"gaps": len(big), "longest_gap_us": float(gaps[order[0]]), **startup.counts()},
                    examples=examples,
                    fix=startup.fix(self.fix),
                    severity=severity_for_share(ctx.share(startup.rest_us)) if startup.dominant else None,
                )
            )
        return out

"""Idle-time breakdown per CUDA stream (HTA's ``get_idle_time_breakdown``).

On each stream, kernels/memcpys/memsets sorted by start; the gap before each one (start - previous end) is:
host_wait when the launching runtime call began after the previous kernel ended (the host was late), else
kernel_wait when the gap is < ``consecutive_kernel_delay`` µs (launch overhead of back-to-back kernels), else
other. HTA documents the threshold as 30 "ns" but compares it with µs values; dyno states it in µs (same
figures). The first kernel of a stream has no gap. Gaps can be negative if a stream's kernels overlap in the trace.

A stream is the pair (device, stream id): in a trace of one process driving several GPUs two devices can both have
a stream 7 (CUPTI's stream ids are unique only within a context, one per device), and merging them would
interleave two devices' kernels into bogus (even negative) gaps. HTA groups by stream id alone; with one device
the figures are the same.
"""

from __future__ import annotations

import msgspec
import numpy as np

from dyno.trace_analysis.analyses.arrays import readonly
from dyno.trace_analysis.analyses.gpu import gpu_scope, one_device
from dyno.trace_analysis.model import Trace

__all__ = ["StreamIdle", "IdleTimeBreakdown", "idle_time_breakdown", "HOST_WAIT", "KERNEL_WAIT", "OTHER"]

HOST_WAIT, KERNEL_WAIT, OTHER = 0, 1, 2


class StreamIdle(msgspec.Struct, frozen=True):
    stream: int
    host_wait_us: float
    kernel_wait_us: float
    other_us: float
    n_gaps: int
    n_host_wait: int
    n_kernel_wait: int
    device: int = 0

    @property
    def idle_us(self) -> float:
        return self.host_wait_us + self.kernel_wait_us + self.other_us

    def share(self, category: int) -> float:
        v = (self.host_wait_us, self.kernel_wait_us, self.other_us)[category]
        return v / self.idle_us if self.idle_us > 0 else 0.0


class IdleTimeBreakdown(msgspec.Struct, frozen=True):
    rank: int
    streams: tuple[StreamIdle, ...]
    consecutive_kernel_delay_us: float
    # per gap (all streams): start of the gap (previous end), length, category, stream, device -- for rules/plots
    gap_start: np.ndarray
    gap_us: np.ndarray
    gap_category: np.ndarray
    gap_stream: np.ndarray
    gap_device: np.ndarray

    @property
    def host_wait_us(self) -> float:
        return sum(s.host_wait_us for s in self.streams)

    @property
    def kernel_wait_us(self) -> float:
        return sum(s.kernel_wait_us for s in self.streams)

    @property
    def other_us(self) -> float:
        return sum(s.other_us for s in self.streams)


def idle_time_breakdown(
    trace: Trace,
    *,
    consecutive_kernel_delay_us: float = 30.0,
    include_last_step: bool = False,
    hta_ns_rounding: bool = False,
) -> IdleTimeBreakdown:
    """Per-stream idle split (see the module docstring). Cached on the trace; treat the arrays as read-only."""
    key = ("idle_time_breakdown", consecutive_kernel_delay_us, include_last_step, hta_ns_rounding)
    return trace.cached(
        key, lambda: _idle_time_breakdown(trace, consecutive_kernel_delay_us, include_last_step, hta_ns_rounding)
    )


def _idle_time_breakdown(
    trace: Trace, consecutive_kernel_delay_us: float, include_last_step: bool, hta_ns_rounding: bool
) -> IdleTimeBreakdown:
    scope = gpu_scope(trace, include_last_step, hta_ns_rounding)
    act = scope.is_activity
    stream = scope.rows.stream[act]
    ts, end, l_ts = scope.ts[act], scope.end[act], scope.launch_ts[act]
    several = len(scope.devices) > 1
    if several:
        device = scope.device[act]
        order = np.lexsort((ts, stream, device))
        device = device[order]
    else:
        order = np.lexsort((ts, stream))
        device = one_device(scope.devices[0] if scope.devices else 0, len(ts))  # not read per row below
    stream, ts, end, l_ts = stream[order], ts[order], end[order], l_ts[order]
    same = np.zeros(len(ts), dtype=bool)
    same[1:] = stream[1:] == stream[:-1]  # rows that have a previous kernel on the same stream (of the same device)
    if several:
        same[1:] &= device[1:] == device[:-1]
    prev_end = np.full(len(ts), np.nan)
    prev_end[1:] = end[:-1]
    prev_end[~same] = np.nan
    gap = ts - prev_end
    with np.errstate(invalid="ignore"):
        host = l_ts > prev_end  # NaN compares False, as in HTA
        kern = ~host & (gap < consecutive_kernel_delay_us)
    cat = np.where(host, HOST_WAIT, np.where(kern, KERNEL_WAIT, OTHER)).astype(np.int8)
    g = same  # rows with a gap
    gs, gcat, gstream, gstart = gap[g], cat[g], stream[g], prev_end[g]
    gdevice = device[g] if several else device[: len(gs)]
    streams = []
    # sorted by (device,) stream: the first row of each run (= the distinct streams)
    firsts = stream[~same].tolist()
    devs = device[~same].tolist() if several else [scope.devices[0] if scope.devices else 0] * len(firsts)
    for s, d in zip(firsts, devs, strict=True):
        m = gstream == s
        if several:
            m &= gdevice == d
        c, v = gcat[m], gs[m]
        streams.append(
            StreamIdle(
                stream=int(s),
                host_wait_us=float(v[c == HOST_WAIT].sum()),
                kernel_wait_us=float(v[c == KERNEL_WAIT].sum()),
                other_us=float(v[c == OTHER].sum()),
                n_gaps=int(m.sum()),
                n_host_wait=int((c == HOST_WAIT).sum()),
                n_kernel_wait=int((c == KERNEL_WAIT).sum()),
                device=int(d),
            )
        )
    readonly(gstart, gs, gcat, gstream)
    return IdleTimeBreakdown(
        rank=trace.rank,
        streams=tuple(streams),
        consecutive_kernel_delay_us=consecutive_kernel_delay_us,
        gap_start=gstart,
        gap_us=gs,
        gap_category=gcat,
        gap_stream=gstream,
        gap_device=gdevice,
    )

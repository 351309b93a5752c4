"""GPU time by kernel type and by overlap of types (HTA's ``get_gpu_kernel_breakdown`` kernel-type table).

Per analysed type (COMPUTATION, COMMUNICATION and, with ``include_memory``, MEMORY) the union of its rows' intervals;
then every instant where at least one of them runs is labelled by the set of types running then: "COMPUTATION",
"COMMUNICATION", "COMPUTATION overlapping COMMUNICATION", "COMPUTATION overlapping MEMORY", ... (the types in
that order, joined by " overlapping ", as HTA names them). The categories partition the union of the analysed
types' time, so their shares add up to 1. OTHER rows (cuda_sync) are not analysed.

Over the GPU scope of the other analyses (HTA's window, ``gpu.gpu_scope``). A stream is a device's: with several
GPUs each device is swept on its own and the times summed (HTA pools devices, which would call compute on one GPU
"overlapping" communication on another); with one GPU the figures are HTA's. HTA truncates each segment to whole
µs (``astype(int)``); dyno keeps exact times (the same on µs traces, and on ns traces with ``hta_ns_rounding``).
"""

from __future__ import annotations

import msgspec
import numpy as np

from dyno.trace_analysis.analyses.gpu import KernelType, device_groups, gpu_scope, scope_kernel_types
from dyno.trace_analysis.analyses.intervals import merge
from dyno.trace_analysis.model import Trace

__all__ = ["KernelTypeShare", "KernelTypeOverlap", "kernel_type_overlap"]

# HTA's order of the analysed types (the bit of each in the sweep, and the order of words in a category's name)
_ANALYSED = (KernelType.COMPUTATION, KernelType.COMMUNICATION, KernelType.MEMORY)


class KernelTypeShare(msgspec.Struct, frozen=True):
    kernel_type: str  # "COMPUTATION", "COMPUTATION overlapping COMMUNICATION", ...
    us: float
    share: float  # of ``KernelTypeOverlap.total_us``


class KernelTypeOverlap(msgspec.Struct, frozen=True):
    rank: int
    include_memory: bool
    total_us: float  # union of the analysed types' time (summed over devices)
    categories: tuple[KernelTypeShare, ...]  # by time, descending; only categories with time


def _label(bits: int, types: tuple[KernelType, ...]) -> str:
    return " overlapping ".join(t.name for i, t in enumerate(types) if bits & (1 << i))


def kernel_type_overlap(
    trace: Trace, *, include_memory: bool = True, hta_ns_rounding: bool = False
) -> KernelTypeOverlap:
    """The kernel-type table (see the module docstring). Cached on the trace."""
    key = ("kernel_type_overlap", include_memory, hta_ns_rounding)
    return trace.cached(key, lambda: _kernel_type_overlap(trace, include_memory, hta_ns_rounding))


def _kernel_type_overlap(trace: Trace, include_memory: bool, hta_ns_rounding: bool) -> KernelTypeOverlap:
    scope = gpu_scope(trace, False, hta_ns_rounding)
    kt = scope_kernel_types(trace, False, hta_ns_rounding)
    types = _ANALYSED if include_memory else _ANALYSED[:2]
    by_bits: dict[int, float] = {}
    for _, sel in device_groups(scope.device):
        ts, end, k = (scope.ts, scope.end, kt) if sel is None else (scope.ts[sel], scope.end[sel], kt[sel])
        times, deltas = [], []
        for i, t in enumerate(types):
            m = k == t.value
            s, e = merge(ts[m], end[m])
            times += [s, e]
            deltas += [np.full(len(s), 1 << i, np.int64), np.full(len(e), -(1 << i), np.int64)]
        at = np.concatenate(times)
        if not len(at):
            continue
        delta = np.concatenate(deltas)
        # ends before starts at equal times: a segment of length 0 either way, but the running set stays exact
        order = np.lexsort((delta, at))
        at, running = at[order], delta[order].cumsum()
        dur = at[1:] - at[:-1]
        bits = running[:-1]
        live = (bits > 0) & (dur > 0)
        # bits are 1 .. 2**len(types) - 1: a bincount, not np.unique (which imports numpy.ma, ~8 ms, on first use)
        sums = np.bincount(bits[live], weights=dur[live], minlength=1 << len(types)).tolist()
        for b, d in enumerate(sums):
            if d > 0:
                by_bits[b] = by_bits.get(b, 0.0) + d
    total = sum(by_bits.values())
    cats = sorted(
        (KernelTypeShare(_label(b, types), d, d / total if total > 0 else 0.0) for b, d in by_bits.items()),
        key=lambda c: -c.us,
    )
    return KernelTypeOverlap(trace.rank, include_memory, total, tuple(cats))

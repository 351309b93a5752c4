"""CUDA start-up in the analysed trace: one-off initialisation calls, and the GPU idle time they account for.

A trace taken from the start of a program holds the CUDA start-up: the context is created by the first runtime
call that needs one (PyTorch's first is often ``cudaDeviceGetStreamPriorityRange``: 29.9 s in alexnet), each
library with its own statically linked runtime initialises it on its first call (cuDNN's handle creation:
``cudaStreamCreateWithFlags`` 733 ms and ``cudaFree`` 6.0 s, the ``cudaFree(0)`` idiom), and with lazy loading
(the default since CUDA 12.2; PyTorch sets ``CUDA_MODULE_LOADING=LAZY`` itself when it is unset) a kernel's
module is loaded by its first launch (alexnet: a 3.06 s ``cudaLaunchKernel``). The GPU idles meanwhile, and the
GPU-idle rules (low-gpu-util, gpu-starvation, host-bound) would report that as the loop's cost. This module
measures it once per rank (cached on the trace) so that they can say how much of their time lost is start-up.

Start-up calls (runtime/driver calls of the trace, each at least ``STARTUP_MIN_CALL_US`` long):

- the first launch of each kernel (``first_kernel_launches``, the test slow-runtime-calls uses);
- the first call of each name in ``INIT_CALLS``: calls that only take long when they initialise the driver, a
  context or a library's runtime (device queries return cached values in µs once initialised; stream creation
  and ``cudaFree`` take µs to a few ms otherwise).

Evidence for the choice (the shared traces): in alexnet and simple_add those calls are 0.5-30 s each; in the
four steady-state traces (negative_queue, ns_resolution, nccl_parser_config, trace_filter) no first call of an
``INIT_CALLS`` name reaches 0.1 ms and no first launch 42 µs, so the 1 ms floor leaves a wide margin.
``cudaMalloc`` and ``cudaHostAlloc`` are left out: their first calls there (7.2 / 4.2 ms, 3.5 / 2.0 ms) cost what
the later ones cost (page mapping and pinning, not initialisation). Later ``cudaFree`` calls are left out too,
although a second library's ``cudaFree(0)`` is one (simple_add: 2.81 s, cuDNN's second sub-library): in a trace
they cannot be told from real frees, so the measure is a lower bound.

Several GPUs in one process: each device has its own context and loads its own modules, so a kernel's first
launch *on each device* is start-up (the second device's first launch of a kernel the first already ran loads the
module again), and each device's context is created by its own first calls: with n devices in the trace the first
n calls of an ``INIT_CALLS`` name can be start-up (runtime calls carry no device; the 1 ms floor still applies).
"""

from __future__ import annotations

import msgspec
import numpy as np

from ..analyses.arrays import flatnonzero, unique_inverse
from ..analyses.gpu import device_of
from ..analyses.intervals import coverage_within, merge
from ..analyses.launch import LaunchStats, launch_stats
from ..model import Cat
from ..units import fmt_us
from ._common import clip, whole_window_scope
from .context import RuleContext

__all__ = [
    "INIT_CALLS",
    "STARTUP_FIX",
    "STARTUP_MIN_CALL_US",
    "StartupCalls",
    "StartupPart",
    "first_kernel_launches",
    "startup_calls",
    "startup_part",
]

# A start-up call is at least this long: context creation and module loading take milliseconds to seconds, the
# same calls in steady state microseconds (the steady-state shared traces: < 0.1 ms).
STARTUP_MIN_CALL_US = 1000.0

# Calls that initialise the driver, the primary context or a library's CUDA runtime when they are the first to
# need it (CUDA runtime "Initialization": the context is created by the first call that needs one; libraries link
# the runtime statically and initialise their copy on first use, cuBLAS and cuDNN with cudaFree(0)).
INIT_CALLS = frozenset(
    {
        "cudaDeviceGetStreamPriorityRange",
        "cudaGetDeviceCount",
        "cudaGetDeviceProperties",
        "cudaGetDeviceProperties_v2",
        "cudaDeviceGetAttribute",
        "cudaDriverGetVersion",
        "cudaRuntimeGetVersion",
        "cudaGetDevice",
        "cudaSetDevice",
        "cudaInitDevice",
        "cudaFree",
        "cudaStreamCreate",
        "cudaStreamCreateWithFlags",
        "cudaStreamCreateWithPriority",
        "cuInit",
        "cuDevicePrimaryCtxRetain",
        "cuCtxCreate",
        "cuCtxCreate_v2",
        "cuCtxCreate_v3",
    }
)

STARTUP_FIX = (
    "This trace includes CUDA start-up ({startup}: context creation, library initialisation, first kernel "
    "launches), which happens once per process, not every step. Profile after warm-up: a profiler schedule with "
    "wait/warmup steps (torch.profiler.schedule(wait=1, warmup=1, active=N)), or `dyno-cli trace --iterations N` "
    "once the job is training. If start-up itself matters: lazy module loading (the default since CUDA 12.2, and "
    "PyTorch sets CUDA_MODULE_LOADING=LAZY when it is unset) "
    "loads each kernel's module at its first launch; CUDA_MODULE_LOADING=EAGER loads them all when the context "
    "is created instead (out of the first steps, usually a longer start-up in all). Once warmed up: "
)


def first_kernel_launches(ctx: RuleContext, st: LaunchStats) -> np.ndarray:
    """Mask over ``st``'s launches: the earliest launch call of each kernel name (kernels only: a first copy or
    memset loads no module). Read-only, cached per ``st`` (slow-runtime-calls and the start-up measure ask for the
    same launch stats at the default thresholds)."""
    key = ("rules.first_kernel_launches", id(st))
    hit = ctx.trace.cached(key, lambda: (st, _first_kernel_launches(ctx, st)))
    if hit[0] is not st:  # another LaunchStats now has this id (cannot happen while st stays cached on the trace)
        return _first_kernel_launches(ctx, st)
    mask: np.ndarray = hit[1]
    return mask


def _first_kernel_launches(ctx: RuleContext, st: LaunchStats) -> np.ndarray:
    ev = ctx.trace.events
    n = st.gpu_row.shape[0]
    out = np.zeros(n, dtype=bool)
    if not n:
        return out
    order = ev.ts[st.runtime_row].argsort(kind="stable")
    key = ev.name[st.gpu_row[order]].astype(np.int64)
    device = device_of(ev.take(st.gpu_row[order])).astype(np.int64)
    if len(device) and (device != device[0]).any():
        # per (device, name): each device's context loads the kernel's module at its own first launch
        key = key + (device - int(device.min())) * (int(key.max()) + 2)
    _, inv = unique_inverse(key)
    by_name = inv.argsort(kind="stable")  # per name, its launches in call order
    grouped = inv[by_name]
    head = np.ones(n, dtype=bool)
    head[1:] = grouped[1:] != grouped[:-1]
    out[order[by_name[head]]] = True
    out &= ev.cat[st.gpu_row] == Cat.KERNEL.value
    out.setflags(write=False)
    return out


class StartupCalls(msgspec.Struct, frozen=True, eq=False):
    """The start-up calls of one rank (module docstring): their rows in ``trace.events`` (by ts) and the union of
    their intervals as sorted disjoint (start, end)."""

    rows: np.ndarray
    start: np.ndarray
    end: np.ndarray

    @property
    def host_us(self) -> float:
        """Wall time the host spent in start-up calls (their union)."""
        return float((self.end - self.start).sum())

    def overlap(self, starts: np.ndarray, ends: np.ndarray) -> float:
        """Measure of union(start-up calls) ∩ the given intervals, which must not overlap each other (GPU idle gaps
        of one device or one stream)."""
        if not self.start.shape[0] or not len(starts):
            return 0.0
        return _covered(self.start, self.end, np.asarray(starts, np.float64), np.asarray(ends, np.float64))

    def idle_in(self, busy_start: np.ndarray, busy_end: np.ndarray, lo: float, hi: float) -> float:
        """GPU idle inside [lo, hi] during start-up calls: their part inside it not covered by the busy intervals
        (sorted, disjoint: ``RuleContext.device_busy``)."""
        if not self.start.shape[0] or hi <= lo:
            return 0.0
        s, e = clip(self.start, self.end, lo, hi)
        inside = float((e - s).sum())
        if not inside or not busy_start.shape[0]:
            return inside
        return max(inside - _covered(busy_start, busy_end, s, e), 0.0)


def _covered(by_start: np.ndarray, by_end: np.ndarray, start: np.ndarray, end: np.ndarray) -> float:
    """Measure of the disjoint sorted intervals ``by`` inside the intervals [start, end] (which must not overlap
    each other)."""
    return float(coverage_within(by_start, by_end, start, end).sum())


def startup_calls(ctx: RuleContext) -> StartupCalls:
    """The rank's start-up calls (module docstring), cached on the trace: every rule asks the same."""

    def compute() -> StartupCalls:
        ev = ctx.trace.events
        rt = ctx.runtime
        rows: list[np.ndarray] = []
        long_call = rt.dur >= STARTUP_MIN_CALL_US
        if not long_call.any():  # steady-state traces: nothing is long enough, nothing else to compute
            empty = np.empty(0, np.float64)
            return StartupCalls(np.empty(0, np.int64), empty, empty)
        init = flatnonzero(long_call & ctx.names_in(rt, INIT_CALLS))
        if init.shape[0]:
            # a long call counts when it is among the first k of its name, k = the devices in the trace (one
            # context each; rows are sorted by ts): one pass per name, a handful
            name = rt.name
            k = max(len(ctx.device_busy), 1)
            first_of = {n: set(flatnonzero(name == n)[:k].tolist()) for n in set(name[init].tolist())}
            first = [i for i in init.tolist() if i in first_of[int(name[i])]]
            rows.append(rt.index[np.asarray(first, dtype=np.int64)])
        st = launch_stats(ctx.trace, include_last_step=whole_window_scope(ctx))
        long_launch = st.cpu_duration >= STARTUP_MIN_CALL_US
        if long_launch.any():
            rows.append(st.runtime_row[first_kernel_launches(ctx, st) & long_launch])
        # disjoint sets (cudaLaunchKernel is no INIT_CALLS name), sorted by row: by ts
        all_rows = np.sort(np.concatenate(rows)).astype(np.int64) if rows else np.empty(0, np.int64)
        ts = ev.ts[all_rows]
        s, e = merge(ts, ts + ev.dur[all_rows])
        return StartupCalls(all_rows, s, e)

    got: StartupCalls = ctx.trace.cached(("rules.startup_calls",), compute)
    return got


class StartupPart(msgspec.Struct, frozen=True):
    """How much of a finding's time lost is start-up: ``us`` of ``lost_us`` (``share``), against the rule's
    ``min_startup_share`` threshold (``dominant``)."""

    us: float
    lost_us: float
    calls: int
    min_share: float

    @property
    def share(self) -> float:
        return self.us / self.lost_us if self.lost_us > 0 else 0.0

    @property
    def dominant(self) -> bool:
        """Whether the finding is mostly start-up: say so, fix start-up first, rate the rest (``rest_us``)."""
        return self.us > 0 and self.share >= self.min_share

    @property
    def rest_us(self) -> float:
        """The time lost that is not start-up (what the severity rests on when ``dominant``)."""
        return max(self.lost_us - self.us, 0.0)

    def counts(self) -> dict[str, float]:
        """Evidence counts (only when some time lost is start-up: traces without start-up keep their counts)."""
        if self.us <= 0:
            return {}
        return {"startup_us": self.us, "startup_share": self.share, "startup_calls": self.calls}

    def title(self, of: str) -> str:
        """For the title when ``dominant``: "; 76% of <of> (9.80 s) is CUDA start-up in the trace"."""
        if not self.dominant:
            return ""
        return f"; {self.share:.0%} of {of} ({fmt_us(self.us)}) is CUDA start-up in the trace (profile after warm-up)"

    def fix(self, fix: str) -> str:
        """The warm-up fix first, then the rule's own ``fix`` when ``dominant``; else ``fix``."""
        return STARTUP_FIX.format(startup=fmt_us(self.us)) + fix if self.dominant else fix


def startup_part(ctx: RuleContext, lost_us: float, startup_us: float, min_share: float) -> StartupPart:
    """``startup_us`` (a rule's time lost during start-up calls) against its ``lost_us``."""
    return StartupPart(min(startup_us, lost_us), lost_us, int(startup_calls(ctx).rows.shape[0]), min_share)

"""GPU-side views shared by the analyses: the analysis window, kernel types, launch correlation, steps.

Window (HTA-compatible, ``include_last_step=False`` by default): when a trace has two or more ``ProfilerStep#N``
annotations, GPU activity counts only if it was launched (same correlation id) by a CPU-side event that starts
before the last ProfilerStep starts; HTA drops the last step because profiling stops inside it. With fewer
steps every GPU event counts.

HTA rounding (``hta_ns_rounding=True``): when a trace has float timestamps HTA replaces ts by ceil(ts) and end by
floor(ts + dur) before any analysis (a work-around for overlapping ns events); that shortens every event by up
to 2 µs. dyno keeps exact times by default; the flag reproduces HTA's figures.

Devices: one process can drive several GPUs (DataParallel, a model split across cuda:0 and cuda:1, pipeline
stages in one process). Kineto writes each GPU row with ``pid`` = device index and ``tid`` = stream id, and
CUPTI's stream ids are unique only within a context (one per device: two devices can both have a stream 7), so a
stream is the pair (device, stream).
``GpuScope.device`` gives each row's device (``device_of``) and ``device_groups`` the rows of each; the analyses
compute busy/idle per device and never merge streams of different devices (docs/TRACE_ANALYSIS.md, "Several
GPUs in one trace"). HTA keys streams by id alone and pools devices.
"""

from __future__ import annotations

import re
from enum import IntEnum

import msgspec
import numpy as np

from dyno.trace_analysis.analyses.arrays import distinct, flatnonzero, readonly
from dyno.trace_analysis.model import Cat, Events, Trace

__all__ = [
    "KernelType",
    "GpuScope",
    "device_groups",
    "device_of",
    "GPU_ROW_CATS",
    "gpu_row_devices",
    "gpu_scope",
    "one_device",
    "kernel_types",
    "scope_kernel_types",
    "launch_rows",
    "LAUNCH_NAMES",
    "profiler_steps",
    "is_launch_name",
]

# HTA's kernel-type regexes, verbatim: COMMUNICATION r"^nccl.*Kernel"; MEMORY r"(^Memcpy)|(^Memset)|(^dma)";
# not COMPUTATION r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)". ``_kernel_type_of`` evaluates them as plain
# string tests (kernel names are long templates: the regexes cost ~1.5 µs a name); "." stops at a newline, hence
# the first line. tests/unit/trace_analysis/test_fixed_cost.py checks the equivalence against the regexes.
_STEP_RX = re.compile(r"^ProfilerStep\s*#\s*(\d+)$")

# Runtime calls that enqueue work on a stream (HTA's launch set, CUDA and ROCm).
LAUNCH_NAMES = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cuLaunchKernel",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
        "hipLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipMemsetAsync",
        "hipMemcpyAsync",
        "hipMemcpyWithStream",
    }
)


def device_of(events: Events) -> np.ndarray:
    """Device of GPU rows: args["device"], else the pid (Kineto writes the device index there). The model's int16
    column as it is when every row has the arg (the usual case: 2 bytes a row, kept by the cached analyses), else
    int64."""
    dev = events.device
    if (dev >= 0).all():
        return dev
    return np.where(dev >= 0, dev, events.pid).astype(np.int64)


def device_groups(device: np.ndarray) -> list[tuple[int, np.ndarray | None]]:
    """(device, positions of its rows) per distinct device, ascending; ``None`` for "every row" when there is one
    device (the usual trace: callers then use their arrays as they are, no gather)."""
    if not len(device):
        return []
    first = int(device[0])
    if (device == first).all():
        return [(first, None)]
    return [(int(d), flatnonzero(device == d)) for d in distinct(device).tolist()]


def gpu_row_devices(trace: Trace) -> tuple[np.ndarray, tuple[int, ...]]:
    """``device_of`` every GPU row (kernels, memcpy, memset, cuda_sync: the table ``gpu_scope`` and the step busy
    time start from, ``trace.events_of(*GPU_ROW_CATS)``) and the distinct devices, cached: read once per rank, so
    that a one-GPU trace pays no gather after that (``one_device``)."""

    def compute() -> tuple[np.ndarray, tuple[int, ...]]:
        device = device_of(trace.events_of(*GPU_ROW_CATS))
        groups = device_groups(device)
        if len(groups) == 1:
            device = one_device(groups[0][0], len(device))
        return device, tuple(d for d, _ in groups)

    got: tuple[np.ndarray, tuple[int, ...]] = trace.cached("gpu_row_devices", compute)
    return got


def one_device(device: int, n: int) -> np.ndarray:
    """``n`` rows all on ``device``, as a read-only broadcast view (no memory): the per-row device of a one-GPU
    trace."""
    dtype = np.int16 if -32768 <= device < 32768 else np.int64
    # a zero-stride array over one value (what np.broadcast_to builds, without its Python-level set-up)
    view = np.ndarray((n,), dtype, np.array([device], dtype), 0, (0,))
    view.flags.writeable = False
    return view


# the GPU rows every GPU analysis starts from (kernels, copies, memsets and the cuda_sync rows HTA counts)
GPU_ROW_CATS = (Cat.KERNEL, Cat.GPU_MEMCPY, Cat.GPU_MEMSET, Cat.CUDA_SYNC)

_SYNC_STREAM = 4294967295  # cuda_sync rows of device-wide syncs carry uint32(-1) as stream


class KernelType(IntEnum):
    """HTA's kernel classes (by name): NCCL kernels, memcpy/memset, everything else computing, other."""

    COMMUNICATION = 0
    MEMORY = 1
    COMPUTATION = 2
    OTHER = 3


# plain ints: numpy converts a list of IntEnum members element by element, several times slower
_COMMUNICATION, _MEMORY, _COMPUTATION, _OTHER = (k.value for k in KernelType)


def _kernel_type_of(name: str) -> int:
    line = name.partition("\n")[0]
    if line.startswith("nccl") and line.find("Kernel", 4) >= 0:
        return _COMMUNICATION
    if name.startswith(("Memcpy", "Memset", "dma")):
        return _MEMORY
    # what is left of the non-compute regex once nccl kernels and ^Memset are out: .*Memcpy or .*Sync
    if "Memcpy" in line or "Sync" in line:
        return _OTHER
    return _COMPUTATION


_UNCLASSIFIED = -1


def kernel_types(trace: Trace, events: Events) -> np.ndarray:
    """KernelType code per row of ``events`` (classified once per distinct name, and only names that occur in
    a table asked about: the regexes never run on args strings or CPU op names)."""
    strings = trace.strings
    tab = trace.cached(
        ("kernel_type_table", len(strings)), lambda: np.full(len(strings) + 1, _UNCLASSIFIED, dtype=np.int8)
    )
    tab[-1] = _OTHER  # a -1 name id
    ids = trace.name_ids(events)
    todo = ids[tab[ids] == _UNCLASSIFIED].tolist()
    if todo:
        tab[todo] = [_kernel_type_of(strings[i]) for i in todo]
    return tab[events.name]


def is_launch_name(trace: Trace) -> np.ndarray:
    """Boolean table over string ids: names in LAUNCH_NAMES."""

    def table() -> np.ndarray:
        t = np.zeros(len(trace.strings) + 1, dtype=bool)
        ids = [i for i in map(trace.strings.lookup, LAUNCH_NAMES) if i >= 0]
        t[ids] = True
        return t

    return trace.cached(("launch_table", len(trace.strings)), table)


def profiler_steps(trace: Trace) -> Events:
    """CPU-side ``ProfilerStep#N`` annotations, sorted by ts (GPU-side copies excluded)."""

    def compute() -> Events:
        # the annotation/op sub-table (same rows as masking every event by category; its names exclude the long
        # kernel templates the name filter would otherwise join and scan)
        ev = trace.events_of(Cat.USER_ANNOTATION, Cat.CPU_OP)
        return ev.take(trace.name_mask(ev, lambda s: _STEP_RX.match(s) is not None, "ProfilerStep"))

    return trace.cached("profiler_steps", compute)


def step_number(name: str) -> int | None:
    m = _STEP_RX.match(name)
    return int(m.group(1)) if m else None


def _runtime_by_correlation(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Runtime/driver rows (in ``trace.events``) with a correlation id sorted by it (stable), and the sorted ids."""
    runtime = trace.events_of(Cat.CUDA_RUNTIME, Cat.CUDA_DRIVER)
    corr = runtime.correlation
    has = corr >= 0
    corr = corr[has]
    order = corr.argsort(kind="stable")
    out = (runtime.index[has][order], corr[order])
    readonly(*out)
    return out


def launch_rows(trace: Trace, gpu: Events) -> np.ndarray:
    """For each row of ``gpu``: row in ``trace.events`` of the CPU-side event (cuda_runtime / cuda_driver) with
    the same correlation id, or -1."""
    rows_sorted, corr_sorted = trace.cached("runtime_by_correlation", lambda: _runtime_by_correlation(trace))
    if not len(rows_sorted) or not len(gpu):
        return np.full(len(gpu), -1, dtype=np.int64)
    pos = corr_sorted.searchsorted(gpu.correlation)
    pos_c = np.minimum(pos, len(corr_sorted) - 1)
    hit = (corr_sorted[pos_c] == gpu.correlation) & (gpu.correlation >= 0)
    return np.where(hit, rows_sorted[pos_c], -1)


class GpuScope(msgspec.Struct, frozen=True, eq=False):
    """The GPU rows the analyses use (see module docstring) and where they came from.

    ``rows``: GPU rows as HTA sees them (kernels, memcpy, memset and cuda_sync rows with a stream), windowed.
    ``activity``: the subset that is real GPU work (kernels, memcpy, memset): dyno's "busy" definition.
    ``launch``: per ``rows`` row, the launching CPU-side row in ``trace.events`` (-1 if none).
    ``ts`` / ``end``: start and end of each ``rows`` row (HTA-rounded when requested);
    ``launch_ts`` / ``launch_end``: the same for the launching row (NaN when none).
    ``device``: per ``rows`` row, its GPU (``device_of``); ``devices``: the distinct ones, ascending.
    """

    rows: Events
    activity: Events
    launch: np.ndarray
    windowed: bool
    window_end: float | None
    ts: np.ndarray
    end: np.ndarray
    launch_ts: np.ndarray
    launch_end: np.ndarray
    device: np.ndarray
    devices: tuple[int, ...]
    activity_mask: np.ndarray  # over ``rows``: real GPU work (``activity``), read-only

    @property
    def is_activity(self) -> np.ndarray:
        """Mask over ``rows``: real GPU work (not a cuda_sync row); read-only, computed once."""
        return self.activity_mask


def scope_kernel_types(trace: Trace, include_last_step: bool = False, hta_ns_rounding: bool = False) -> np.ndarray:
    """``kernel_types(trace, scope.rows)`` of that GPU scope, cached: temporal (both busy definitions), overlap,
    the kernel breakdown and the rank timing read it (``[scope.is_activity]`` gives the activity's types)."""

    def compute() -> np.ndarray:
        kt = kernel_types(trace, gpu_scope(trace, include_last_step, hta_ns_rounding).rows)
        readonly(kt)
        return kt

    return trace.cached(("scope_kernel_types", include_last_step, hta_ns_rounding), compute)


def gpu_scope(trace: Trace, include_last_step: bool = False, hta_ns_rounding: bool = False) -> GpuScope:
    """The analysis window's GPU events (cached per trace)."""
    key = ("gpu_scope", include_last_step, hta_ns_rounding)
    return trace.cached(key, lambda: _gpu_scope(trace, include_last_step, hta_ns_rounding))


def _times(trace: Trace, rows: np.ndarray, rounding: bool) -> tuple[np.ndarray, np.ndarray]:
    ev = trace.events
    ts, end = ev.ts[rows], ev.ts[rows] + ev.dur[rows]
    if rounding and trace.meta.float_timestamps:
        return np.ceil(ts), np.floor(end)
    return ts, end


def _gpu_scope(trace: Trace, include_last_step: bool, rounding: bool) -> GpuScope:
    rows = trace.events_of(*GPU_ROW_CATS)
    with_stream = rows.stream != -1
    rows = rows.take(with_stream)
    all_devices, devices = gpu_row_devices(trace)
    if len(devices) > 1:
        all_devices = all_devices[with_stream]
    launch = launch_rows(trace, rows)
    steps = profiler_steps(trace)
    ev_ts = np.ceil(trace.events.ts) if rounding and trace.meta.float_timestamps else trace.events.ts
    windowed = False
    window_end: float | None = None
    if len(steps) >= 2:
        # HTA (_filter_irrelevant_gpu_kernels): keep GPU rows whose correlation matches a CPU-side row that
        # starts before the last step's start (or ends before its end with include_last_step)
        windowed = True
        s_ts, s_end = _times(trace, steps.index, rounding)
        ok = launch >= 0
        if include_last_step:
            window_end = float(s_end.max())
            ok[ok] = ev_ts[launch[ok]] <= window_end
        else:
            window_end = float(s_ts.max())
            ok[ok] = ev_ts[launch[ok]] < window_end
        rows = rows.take(ok)
        launch = launch[ok]
        if len(devices) > 1:
            all_devices = all_devices[ok]
    act_mask = rows.cat != Cat.CUDA_SYNC.value
    readonly(act_mask)
    ts, end = _times(trace, rows.index, rounding)
    has = launch >= 0
    l_ts = np.full(len(rows), np.nan)
    l_end = np.full(len(rows), np.nan)
    l_ts[has], l_end[has] = _times(trace, launch[has], rounding)
    if len(devices) > 1:
        groups = device_groups(all_devices)  # the devices left in the scope
        device = one_device(groups[0][0], len(rows)) if len(groups) == 1 else all_devices
    else:  # the usual one-GPU trace: a view, not a column kept per cached scope
        groups = [(devices[0], None)] if devices and len(rows) else []
        device = one_device(devices[0] if devices else 0, len(rows))
    return GpuScope(
        rows=rows,
        activity=rows.take(act_mask),
        launch=launch,
        windowed=windowed,
        window_end=window_end,
        ts=ts,
        end=end,
        launch_ts=l_ts,
        launch_end=l_end,
        device=device,
        devices=tuple(d for d, _ in groups),
        activity_mask=act_mask,
    )

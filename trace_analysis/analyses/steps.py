"""Per-step timings: ``ProfilerStep#N`` windows, else optimizer steps; their spread and GPU busy time per step.

Steps come from the CPU-side ``ProfilerStep#N`` annotations. Without them, optimizer calls
(``Optimizer.step#...``) delimit steps: step k runs from the end of optimizer call k-1 to the end of call k.
An iteration trace (dyno's ``--iterations N``, Kineto's on-demand iteration tracing) starts and stops the profiler
in optimizer step hooks, inside a call: its last ``Optimizer.step`` ends at or after the profiler's own span
(``PyTorch Profiler (0)``), and its first step runs from the profiler's start to the first call's end, so the N
calls delimit N steps, not N - 1; its last step ends with the last CPU op of the last call (the recorded end of that
call holds the profiler's stop). A profiler started by hand at any point gets no such first step (it would be a
part of one). Without either marker, there are no steps (``source == "none"``) and callers treat the whole trace as
one window.
"""

from __future__ import annotations

import re

import msgspec
import numpy as np

from dyno.trace_analysis.analyses.arrays import median
from dyno.trace_analysis.analyses.gpu import (
    GPU_ROW_CATS,
    device_groups,
    gpu_row_devices,
    profiler_steps,
    step_number,
)
from dyno.trace_analysis.analyses.intervals import coverage_before, merge
from dyno.trace_analysis.model import Cat, Trace

__all__ = ["Step", "StepStats", "closed_at_stop", "step_timings", "spread", "work_end"]

_OPT_RX = re.compile(r"^Optimizer\.step#")


class Step(msgspec.Struct, frozen=True):
    number: int  # N of ProfilerStep#N, else the optimizer call's index
    ts: float
    dur_us: float
    gpu_busy_us: float  # union of GPU work inside the window, mean over the devices (0 for CPU-only traces)

    @property
    def end(self) -> float:
        return self.ts + self.dur_us

    @property
    def gpu_util(self) -> float:
        return self.gpu_busy_us / self.dur_us if self.dur_us > 0 else 0.0


class StepStats(msgspec.Struct, frozen=True):
    rank: int
    source: str  # "profiler_step" | "optimizer" | "none"
    steps: tuple[Step, ...]
    mean_us: float
    median_us: float
    std_us: float
    min_us: float
    max_us: float
    markers: int = 0  # the ProfilerStep annotations or optimizer calls the steps come from

    @property
    def cv(self) -> float:
        """Coefficient of variation of step time."""
        return self.std_us / self.mean_us if self.mean_us > 0 else 0.0

    @property
    def durations(self) -> np.ndarray:
        return np.array([s.dur_us for s in self.steps], dtype=np.float64)


def spread(values: np.ndarray) -> tuple[float, float, float, float, float]:
    """(mean, median, std, min, max); zeros for no values."""
    if not len(values):
        return (0.0, 0.0, 0.0, 0.0, 0.0)
    return (
        float(values.mean()),
        median(values),
        float(values.std()),
        float(values.min()),
        float(values.max()),
    )


def closed_at_stop(trace: Trace, ends: np.ndarray) -> np.ndarray:
    """Which host ranges ending at ``ends`` the profiler closed at its own stop: those ending at or after its span
    (``PyTorch Profiler (0)``), i.e. still open when it stopped, as the optimizer call in whose step hook an
    iteration trace stops it; their recorded end holds the stop too (tens of ms). None without that span."""
    prof = trace.events_of(Cat.TRACE)
    if len(prof) != 1:
        return np.zeros(len(ends), dtype=bool)
    return np.asarray(ends) >= float(prof.end[0])


def work_end(trace: Trace, ts: float, end: float) -> float:
    """Where a range closed at the profiler's stop (``closed_at_stop``) did its work: the end of the last CPU op in
    it; its recorded end when it holds no op."""
    ops = trace.events_of(Cat.CPU_OP)
    inside = (ops.ts >= ts) & (ops.end < end)
    return float(ops.end[inside].max()) if inside.any() else end


def _windows(trace: Trace) -> tuple[str, np.ndarray, np.ndarray, list[int], int]:
    """(source, step starts, step ends, step numbers, markers)."""
    steps = profiler_steps(trace)
    if len(steps):
        numbers = [step_number(trace.strings[i]) or k for k, i in enumerate(steps.name)]
        return "profiler_step", steps.ts, steps.end, numbers, len(steps)
    # host-side rows (the same rows as masking every event by these categories, from the cached sub-table whose
    # names exclude the long kernel templates)
    ev = trace.events_of(Cat.USER_ANNOTATION, Cat.CPU_OP, Cat.PYTHON_FUNCTION)
    opt = ev.take(trace.name_mask(ev, lambda s: _OPT_RX.match(s) is not None, "Optimizer.step#"))
    if len(opt) >= 2:
        # nested duplicates (e.g. a python_function and a user_annotation for the same call): keep outermost
        ends = opt.end
        keep = np.ones(len(opt), dtype=bool)
        keep[1:] = opt.ts[1:] >= np.maximum.accumulate(ends)[:-1]
        first_call = float(opt.ts[keep][0])
        ends = ends[keep]
        prof = trace.events_of(Cat.TRACE)  # the profiler's own span
        if len(prof) == 1 and float(prof.ts[0]) < first_call and float(ends[-1]) >= float(prof.end[0]):
            # stopped inside the last call (an optimizer step hook), so started inside one too: an iteration trace
            starts = np.concatenate(([float(prof.ts[0])], ends[:-1]))
            ends = ends.astype(float)
            ends[-1] = work_end(trace, float(opt.ts[keep][-1]), float(ends[-1]))  # closed at the stop
            return "optimizer", starts, ends, list(range(1, len(ends) + 1)), len(ends)
        return "optimizer", ends[:-1], ends[1:], list(range(1, len(ends))), len(ends)
    return "none", np.empty(0), np.empty(0), [], 0


def step_timings(trace: Trace) -> StepStats:
    """Step windows and their spread (see the module docstring). Cached on the trace."""
    return trace.cached("step_timings", lambda: _step_timings(trace))


def _step_timings(trace: Trace) -> StepStats:
    source, starts, ends, numbers, markers = _windows(trace)
    busy = np.zeros(len(starts))
    # all GPU work (no last-step window: every step gets its GPU time); same cached table as gpu_scope uses
    gpu = trace.events_of(*GPU_ROW_CATS)
    work = gpu.cat != Cat.CUDA_SYNC.value
    if len(starts) and work.any():
        # GPU busy inside each window: coverage of the union of GPU work, evaluated at the window bounds; with
        # several devices each device's union, and their mean (one GPU busy while another idles is half busy)
        w_ts, w_end = gpu.ts[work], gpu.end[work]
        device, devices = gpu_row_devices(trace)
        groups = device_groups(device[work]) if len(devices) > 1 else [(devices[0], None)]
        for _, sel in groups:
            u_s, u_e = merge(w_ts[sel], w_end[sel]) if sel is not None else merge(w_ts, w_end)
            busy = busy + (coverage_before(u_s, u_e, ends) - coverage_before(u_s, u_e, starts))
        if len(groups) > 1:
            busy = busy / len(groups)
    steps = tuple(
        Step(int(n), float(s), float(e - s), float(b)) for n, s, e, b in zip(numbers, starts, ends, busy, strict=True)
    )
    mean, median, std, lo, hi = spread(ends - starts)
    return StepStats(trace.rank, source, steps, mean, median, std, lo, hi, markers)

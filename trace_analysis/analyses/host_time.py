"""Where the host's time in a window went: in CPU ops, in other traced host regions, or in nothing the profiler
recorded.

Over all host threads of the rank, clipped to the window: ``ops_us`` = union of ``cpu_op`` rows; ``other_us`` =
union of the other traced host rows (user annotations such as ``enumerate(DataLoader)#...__next__`` or
``Optimizer.step#...``, ``python_function`` frames, CUDA runtime/driver calls) outside any op; ``untraced_us`` = the
rest of the window, when no traced host row runs on any thread: Python between ops, sleeps, I/O, lock and
process waits (a DataLoader's worker processes are not in the trace). The ``ProfilerStep#N`` annotations and the
profiler's own span cover the whole step and so explain nothing: they are not counted.
"""

from __future__ import annotations

import msgspec
import numpy as np

from dyno.trace_analysis.analyses.arrays import member
from dyno.trace_analysis.analyses.gpu import profiler_steps
from dyno.trace_analysis.analyses.intervals import clip, merge
from dyno.trace_analysis.model import Cat, Trace

__all__ = ["HostTime", "host_time"]

_OTHER_CATS = (Cat.USER_ANNOTATION, Cat.PYTHON_FUNCTION, Cat.CUDA_RUNTIME, Cat.CUDA_DRIVER)


class HostTime(msgspec.Struct, frozen=True):
    window_us: float
    ops_us: float
    other_us: float

    @property
    def untraced_us(self) -> float:
        return max(self.window_us - self.ops_us - self.other_us, 0.0)

    def share(self, v: float) -> float:
        return v / self.window_us if self.window_us > 0 else 0.0


def _clipped_union(ts: np.ndarray, end: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    s, e = clip(ts, end, lo, hi)
    keep = e > s
    return merge(s[keep], e[keep])


def host_time(trace: Trace, lo: float, hi: float) -> HostTime:
    """The split of [lo, hi] (see the module docstring). Cached on the trace per window."""
    return trace.cached(("host_time", lo, hi), lambda: _host_time(trace, lo, hi))


def _host_time(trace: Trace, lo: float, hi: float) -> HostTime:
    window = max(hi - lo, 0.0)
    ops = trace.events_of(Cat.CPU_OP)
    o_s, o_e = _clipped_union(ops.ts, ops.end, lo, hi)
    ops_us = float((o_e - o_s).sum())
    other = trace.events_of(*_OTHER_CATS)
    keep = ~member(other.index, profiler_steps(trace).index)
    a_s, a_e = _clipped_union(other.ts[keep], other.end[keep], lo, hi)
    # union(ops, other) - union(ops): the other rows' time outside every op
    u_s, u_e = merge(np.concatenate((o_s, a_s)), np.concatenate((o_e, a_e)))
    return HostTime(window, ops_us, float((u_e - u_s).sum()) - ops_us)

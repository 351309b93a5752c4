"""The profiling budget: never more than a set share of a job's time under the profiler.

The rule, per job on this host: a moment is taken only if, counting the expected length E of the trace it starts,
the time profiled stays within the budget at that trace's end: ``P + E <= budget * (A + E)``, where P is the time
this host's periodic traces of the job have held its processes under the profiler so far (measured: start -> end of
each process's part, from the trace manager's records; a trace still running counts E until it ends) and A the
job's age. E is the job's last measured periodic trace, before any the configured duration. Moments that would break
it are skipped, so the share stays at or under the budget whatever the interval.

The time of one trace on a host is the longest of its processes' times (they record in parallel: the job's wall
time under the profiler, not the sum over processes).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from dyno.daemon.tracing.values import TraceState, TraceView

__all__ = ["Budget", "JobUsage", "binding_note", "profiled_ms"]

_MAX_JOBS = 4096  # jobs remembered at most (the least recently used go first)


def profiled_ms(view: TraceView) -> int:
    """The wall time `view`'s processes were under the profiler: the longest of start (RUNNING) -> end (its final
    state). A part that ended done without a RUNNING report counts its requested duration (0 for an iteration one);
    a part that never started recording counts nothing."""
    longest = 0
    for p in view.processes:
        if p.running_ms and p.updated_ms >= p.running_ms and p.state != TraceState.RUNNING:
            longest = max(longest, p.updated_ms - p.running_ms)
        elif p.state == TraceState.DONE:
            longest = max(longest, view.spec.duration_ms or 0)
    return longest


@dataclass(frozen=True)
class JobUsage:
    """One job's periodic profiling on this host so far."""

    profiled_ms: int = 0  # finished traces' measured time
    traces: int = 0  # finished periodic traces measured
    last_ms: int = 0  # the last one's measured time (0: none yet)


class Budget:
    """Per-job time under the profiler and the rule above. Thread-safe."""

    def __init__(self, share: float, default_expected_ms: int) -> None:
        if not 0 < share <= 1:
            raise ValueError(f"budget must be in (0, 1], not {share}")
        self.share = share
        self._default_ms = default_expected_ms
        self._lock = threading.Lock()
        self._usage: OrderedDict[str, JobUsage] = OrderedDict()

    def usage(self, job_id: str) -> JobUsage:
        with self._lock:
            return self._usage.get(job_id, JobUsage())

    def expected_ms(self, job_id: str) -> int:
        """E: the job's last measured trace, else the configured duration."""
        last = self.usage(job_id).last_ms
        return last if last > 0 else self._default_ms

    def allows(self, job_id: str, age_ms: int, running_ms: int = 0) -> bool:
        """True when a trace of the job started now keeps it within the budget; `running_ms`: what its traces in
        flight are expected to take still (they are not measured yet)."""
        e = self.expected_ms(job_id)
        spent = self.usage(job_id).profiled_ms + running_ms
        return spent + e <= self.share * (max(age_ms, 0) + e)

    def record(self, job_id: str, ms: int) -> JobUsage:
        """A finished periodic trace of the job held its processes `ms` under the profiler."""
        with self._lock:
            u = self._usage.pop(job_id, JobUsage())
            u = JobUsage(u.profiled_ms + max(ms, 0), u.traces + 1, max(ms, 0) or u.last_ms)
            self._usage[job_id] = u
            while len(self._usage) > _MAX_JOBS:
                self._usage.popitem(last=False)
            return u


def binding_note(interval_s: float, expected_ms: int, share: float) -> str:
    """Why the budget, not the interval, sets how often a job is traced ("" when the interval does): a trace of
    `expected_ms` every `interval_s` would take more than `share` of a job's time."""
    if expected_ms <= 0 or expected_ms / 1000 <= share * interval_s:
        return ""
    every_s = expected_ms / 1000 / share
    return (
        f"a trace of ~{expected_ms / 1000:g} s every {interval_s:g} s is {expected_ms / 10 / interval_s:.3g}% of a "
        f"job's time, above periodic_budget {share * 100:g}%: the budget binds, and a job is traced about every "
        f"{every_s:.0f} s (moments in between are skipped)"
    )

"""What one analysis is given: a finished trace's files and whose they are, from the trace manager's view of it."""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass

from dyno.daemon.tracing.values import TraceState, TraceView
from dyno.trace_summary import PERIODIC_PREFIX, AnalysisFailure, AnalysisState, TraceSummary

__all__ = ["AnalysisJob", "job_of", "trace_failed"]

_MAX_FAILED_NAMED = 4  # processes a TRACE_FAILED message names


@dataclass(frozen=True)
class AnalysisJob:
    """One finished trace to analyse: `files` its DONE processes' files; `uid` the one user of its processes (-1:
    several or unknown), whom a root dynod's worker runs as (nobody for -1: runner.py)."""

    trace_id: str
    files: tuple[str, ...]
    job_id: str
    user: str
    uid: int
    hostname: str
    trace_finished_ms: int
    no_file: str = ""  # without files: why (TRACE_FAILED's message; no worker starts)

    @property
    def periodic(self) -> bool:
        return self.trace_id.startswith(PERIODIC_PREFIX)

    def summary(self, state: AnalysisState = AnalysisState.PENDING) -> TraceSummary:
        """The summary's fields the daemon fills (the worker fills the analysis itself)."""
        return TraceSummary(
            trace_id=self.trace_id,
            job_id=self.job_id,
            user=self.user,
            hostname=self.hostname,
            periodic=self.periodic,
            state=state,
            trace_finished_ms=self.trace_finished_ms,
        )


def job_of(view: TraceView, hostname: str, name_of: Callable[[int], str]) -> AnalysisJob:
    """The analysis of a trace (finished or not): its job is the request's, else its processes' most common one."""
    procs = view.processes
    job_id = view.spec.job_id or (collections.Counter(p.job_id for p in procs).most_common(1) or [("", 0)])[0][0]
    uids = {p.uid for p in procs}
    uid = uids.pop() if len(uids) == 1 else -1
    done = tuple(p.path for p in procs if p.state == TraceState.DONE and p.path)
    finished_ms = max((p.updated_ms for p in procs), default=view.created_ms)
    no_file = "" if done else _no_file(view)
    return AnalysisJob(view.trace_id, done, job_id, name_of(uid), uid, hostname, finished_ms, no_file)


def _no_file(view: TraceView) -> str:
    states = [f"pid {p.pid} {p.state.value}" + (f" ({p.error})" if p.error else "") for p in view.processes]
    more = len(states) - _MAX_FAILED_NAMED
    named = "; ".join(states[:_MAX_FAILED_NAMED]) + (f"; and {more} more" if more > 0 else "")
    return f"the trace wrote no file: {named or 'it had no processes'}"


def trace_failed(job: AnalysisJob, now_ms: int) -> TraceSummary:
    """The result of a trace none of whose processes wrote a file: no worker is started."""
    return job.summary().failed(AnalysisFailure.TRACE_FAILED, job.no_file, now_ms)

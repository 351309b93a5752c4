"""The budget across a dynod restart: seeded at start from the periodic traces the trace dir already holds.

The budget's measurements (budget.Budget) live in memory, while a job's age comes from job accounting, which a
restarted dynod resumes; without this a restart would let periodic traces run back to back until the share caught
up. So before its first pass the periodic profiler reads the records (tracing/recorded.py, through
journal.load_record: every check of an untrusted record, none read directly) of the newest MAX_RESUMED_RECORDS
trace folders named as periodic traces, and counts each finished one whose record says it is periodic (its
measured time, budget.profiled_ms) for the job its request names, oldest first, so that a job's expected length
is its newest trace's.

Not counted: periodic traces deleted by retention, ones older than the newest MAX_RESUMED_RECORDS, ones still
running at the restart, and ones recorded by a dyno that did not keep the `periodic` flag in its records.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dyno.daemon.profiling.budget import Budget, profiled_ms
from dyno.daemon.tracing.recorded import MAX_RECORDS_READ, recorded_traces
from dyno.daemon.tracing.values import TraceView
from dyno.trace_summary import PERIODIC_PREFIX

__all__ = ["MAX_RESUMED_RECORDS", "ResumedBudget", "periodic_records", "resume_budget"]

MAX_RESUMED_RECORDS = MAX_RECORDS_READ  # records read at start at most (their cost: dyno.daemon.tracing.recorded)


@dataclass(frozen=True)
class ResumedBudget:
    """What start-up seeded the budget with."""

    traces: int = 0  # finished periodic traces counted
    jobs: int = 0  # distinct jobs among them
    profiled_ms: int = 0  # their time under the profiler, all jobs together


def periodic_records(trace_dir: Path, limit: int = MAX_RESUMED_RECORDS) -> list[TraceView]:
    """The finished periodic traces recorded in `trace_dir`, of the newest `limit` candidate folders (by their
    record's time), oldest first (by creation). Records not believed are skipped (load_record warns)."""
    # folders named otherwise are never read; whether a trace is periodic, and of which job, is what its record says
    views = recorded_traces(trace_dir, limit, prefix=PERIODIC_PREFIX)
    found = [v for v in views if v.finished and v.spec.periodic]
    return sorted(found, key=lambda v: (v.created_ms, v.trace_id))


def resume_budget(budget: Budget, trace_dir: Path, limit: int = MAX_RESUMED_RECORDS) -> ResumedBudget:
    """Count the periodic traces recorded in `trace_dir` (periodic_records) into `budget`."""
    total = 0
    jobs: set[str] = set()
    views = periodic_records(trace_dir, limit)
    for view in views:
        ms = profiled_ms(view)
        budget.record(view.spec.job_id, ms)
        total += ms
        jobs.add(view.spec.job_id)
    return ResumedBudget(len(views), len(jobs), total)

"""The budget across a dynod restart: seeded at start from the periodic traces the trace dir already holds.

The budget's measurements (budget.Budget) live in memory, while a job's age comes from job accounting, which a
restarted dynod resumes; without this a restart would let periodic traces run back to back until the share caught
up. So before its first pass the periodic profiler reads the records (journal.load_record: every check of an
untrusted record, none read directly) of the newest MAX_RESUMED_RECORDS trace folders whose record names a
periodic trace, and counts each finished one's measured time (budget.profiled_ms) for the job its request names,
oldest first, so that a job's expected length is its newest trace's.

Not counted: periodic traces deleted by retention, ones older than the newest MAX_RESUMED_RECORDS, ones still
running at the restart, and ones recorded by a dyno that did not keep the `periodic` flag in its records.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dyno.daemon.profiling.budget import Budget, profiled_ms
from dyno.daemon.tracing.journal import load_record
from dyno.daemon.tracing.values import TraceView
from dyno.trace_ids import is_trace_id
from dyno.trace_layout import RECORD_NAME
from dyno.trace_summary import PERIODIC_PREFIX

__all__ = ["MAX_RESUMED_RECORDS", "ResumedBudget", "periodic_records", "resume_budget"]

# Records read at start at most: each is a few KB of JSON, ~0.1-0.2 s for all (1-8 processes each, warm cache); at
# the default interval (30 min) that is days of traces of tens of jobs, more than retention usually keeps.
MAX_RESUMED_RECORDS = 1000


@dataclass(frozen=True)
class ResumedBudget:
    """What start-up seeded the budget with."""

    traces: int = 0  # finished periodic traces counted
    jobs: int = 0  # distinct jobs among them
    profiled_ms: int = 0  # their time under the profiler, all jobs together


def _record_mtime_ns(trace_dir: Path, name: str) -> int | None:
    try:
        return os.lstat(trace_dir / name / RECORD_NAME).st_mtime_ns
    except OSError:  # no record (still running at the restart, or never finished), or not readable
        return None


def _load(trace_dir: Path, name: str) -> TraceView | None:
    try:
        return load_record(trace_dir, name, quiet=True)
    except OSError:  # its folder went away or became unreadable meanwhile: not counted, like a missing record
        return None


def periodic_records(trace_dir: Path, limit: int = MAX_RESUMED_RECORDS) -> list[TraceView]:
    """The finished periodic traces recorded in `trace_dir`, of the newest `limit` candidate folders (by their
    record's time), oldest first (by creation). Records not believed are skipped (load_record warns)."""
    try:
        with os.scandir(trace_dir) as entries:
            # folders named otherwise are never read; whether a trace is periodic, and of which job, is what its
            # record says (the prefix only filters what to read)
            names = [e.name for e in entries if e.name.startswith(PERIODIC_PREFIX) and is_trace_id(e.name)]
    except OSError:  # no trace dir yet: nothing traced
        return []
    dated = [(t, n) for n in names if (t := _record_mtime_ns(trace_dir, n)) is not None]
    newest = sorted(dated, reverse=True)[: max(limit, 0)]
    views = [_load(trace_dir, name) for _, name in newest]
    found = [v for v in views if v is not None and v.finished and v.spec.periodic]
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

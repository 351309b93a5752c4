"""The trace records a trace dir holds, newest first: what a starting dynod reads of the traces of before it ran
(the periodic budget: dyno.daemon.profiling.resume; the analyses left undone: dyno.daemon.analysis.requeue).

Each record goes through journal.load_record (every check of an untrusted record; one not believed is skipped with
its WARNING). Only the newest `limit` folders (by their record's time) are read: a record is a few KB of JSON, so
MAX_RECORDS_READ of them cost ~0.1-0.2 s at start (bench/analysis_requeue.py; docs/BENCHMARKS.md).
"""

from __future__ import annotations

import os
from pathlib import Path

from dyno.daemon.tracing.journal import load_record
from dyno.daemon.tracing.values import TraceView
from dyno.trace_ids import is_trace_id
from dyno.trace_layout import RECORD_NAME

__all__ = ["MAX_RECORDS_READ", "recorded_traces"]

# Records read at start at most: at periodic profiling's default interval (30 min) that is days of traces of tens
# of jobs, more than retention usually keeps
MAX_RECORDS_READ = 1000


def _record_mtime_ns(trace_dir: Path, name: str) -> int | None:
    try:
        return os.lstat(trace_dir / name / RECORD_NAME).st_mtime_ns
    except OSError:  # no record (still running at the restart, or never finished), or not readable
        return None


def _load(trace_dir: Path, name: str) -> TraceView | None:
    try:
        return load_record(trace_dir, name, quiet=True)
    except OSError:  # its folder went away or became unreadable meanwhile: skipped, like a missing record
        return None


def recorded_traces(trace_dir: Path, limit: int = MAX_RECORDS_READ, prefix: str | None = None) -> list[TraceView]:
    """The traces recorded in the newest `limit` folders of `trace_dir` whose names are trace ids (starting with
    `prefix`, if given), newest record first; finished or not (TraceView.finished). A folder's name only filters
    what is read: what a trace is (periodic, of which job) is what its believed record says."""
    try:
        with os.scandir(trace_dir) as entries:
            names = [e.name for e in entries if (prefix is None or e.name.startswith(prefix)) and is_trace_id(e.name)]
    except OSError:  # no trace dir yet: nothing traced
        return []
    dated = [(t, n) for n in names if (t := _record_mtime_ns(trace_dir, n)) is not None]
    newest = sorted(dated, reverse=True)[: max(limit, 0)]
    return [v for _, name in newest if (v := _load(trace_dir, name)) is not None]

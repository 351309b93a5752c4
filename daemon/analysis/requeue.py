"""Analyses a dynod restart left undone, analysed after the next start without anyone asking.

The analysis queue lives in memory: the traces queued when dynod stopped (an upgrade, a crash), those that
finished while analysis_enabled was false, and those dropped from a full queue have no analysis until
GetTraceSummary asks for one, and periodic traces are never asked for. So, at start, on the analysis queue's own
thread before its first analysis (dynod answers RPCs meanwhile), the records of the newest MAX_RECORDS_READ trace
folders are read (tracing/recorded.py: every check of an untrusted record), and the finished traces with no stored
analysis, newest record first, become the backlog (backlog.py), which analyses.py offers one at a time whenever the
queue is empty: a job's latest analysis is what ListJobs, `dyno-cli jobs` / `opportunities` and the Prometheus
series show, so the newest matter most, and a live trace waits behind at most one of them (none is dropped from a
full queue for an older one). Only a (job, user)'s `per_job` newest finished traces are looked at: the store keeps
that many analyses per job (analysis/store.py), so an older one's analysis would evict a newer one's at its save,
and that one would be found again at the next start.

A trace whose files are gone since (deleted by hand; retention deletes the record with them) is in it too: it
gives TRACE_FAILED naming them, without a worker, as it does live and through GetTraceSummary, so that its job
shows why it has no analysis rather than nothing. Where the database cannot tell which are analysed (it cannot be
used now), every finished trace read is in the backlog, `unchecked` saying why: each is checked at its turn
(backlog.py), which waits until the database answers, so none is analysed twice.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from dyno.daemon.analysis.work import AnalysisJob
from dyno.daemon.jobs.store import StoreError
from dyno.daemon.tracing.recorded import MAX_RECORDS_READ, recorded_traces
from dyno.daemon.tracing.values import TraceView

__all__ = ["Requeued", "requeue_unanalysed"]


@dataclass(frozen=True)
class Requeued:
    """What start-up found: records read (believed), and the finished traces without a stored analysis, newest
    first (the backlog: some may be queued or analysed by the time their turn comes)."""

    records: int
    backlog: tuple[AnalysisJob, ...] = ()
    unchecked: str = ""  # why the stored analyses could not be looked up ("": they were)


def requeue_unanalysed(
    trace_dir: Path,
    analysed: Callable[[Collection[str]], set[str]],
    job_of: Callable[[TraceView], AnalysisJob],
    limit: int = MAX_RECORDS_READ,
    *,
    per_job: int,
) -> Requeued:
    """The finished traces recorded in `trace_dir` that `analysed` (AnalysisStore.analysed) does not know, newest
    first (all of them, `unchecked`, where it raises StoreError); of each (job id, user) only its `per_job`
    (AnalysisStore.per_job) newest finished traces."""
    views = recorded_traces(trace_dir, limit)
    seen: collections.Counter[tuple[str, str]] = collections.Counter()
    kept: list[AnalysisJob] = []
    for v in views:
        if not v.finished:
            continue
        job = job_of(v)
        seen[job.job_id, job.user] += 1
        if seen[job.job_id, job.user] <= per_job:
            kept.append(job)
    try:
        done = analysed([j.trace_id for j in kept]) if kept else set()
    except StoreError as e:
        return Requeued(len(views), tuple(kept), str(e))
    return Requeued(len(views), tuple(j for j in kept if j.trace_id not in done))

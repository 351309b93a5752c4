"""Analyses a dynod restart left undone, queued again at the next start without anyone asking.

The analysis queue lives in memory: the traces queued when dynod stopped (an upgrade, a crash), those that
finished while analysis_enabled was false, and those dropped from a full queue have no analysis until
GetTraceSummary asks for one, and periodic traces are never asked for. So, at start, on the analysis queue's own
thread before its first analysis (dynod answers RPCs meanwhile), the records of the newest MAX_RECORDS_READ trace
folders are read (tracing/recorded.py: every check of an untrusted record), and each finished trace with no stored
analysis is queued, newest record first, while the queue has a free place: a job's latest analysis is what ListJobs,
`dyno-cli jobs` / `opportunities` and the Prometheus series show, so the newest matter most, and the queue's bound
(analysis_queue) holds as it does for live traces (none of them is dropped for an older one). The rest, in the same
order, are the backlog, which analyses.py offers one at a time whenever the queue is empty. Only a (job, user)'s
`per_job` newest finished traces are looked at: the store keeps that many analyses per job (analysis/store.py), so an
older one's analysis would evict a newer one's at its save, and that one would be queued again at the next start.

A trace whose files are gone since (deleted by hand; retention deletes the record with them) is queued too: it
gives TRACE_FAILED naming them, without a worker, as it does live and through GetTraceSummary, so that its job
shows why it has no analysis rather than nothing. A database that cannot be used queues nothing (StoreError to the
caller, which logs it): with no way to tell what was analysed, every trace would be analysed again.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from dyno.daemon.analysis.queue import Offered
from dyno.daemon.analysis.work import AnalysisJob
from dyno.daemon.tracing.recorded import MAX_RECORDS_READ, recorded_traces
from dyno.daemon.tracing.values import TraceView

__all__ = ["Requeued", "requeue_unanalysed"]


@dataclass(frozen=True)
class Requeued:
    """What start-up found: records read (believed), traces queued again, and those it found no free place for,
    newest first (some may be queued or analysed by the time their turn comes)."""

    records: int
    queued: int
    backlog: tuple[AnalysisJob, ...] = ()


def requeue_unanalysed(
    trace_dir: Path,
    analysed: Callable[[Collection[str]], set[str]],
    offer: Callable[[AnalysisJob], Offered],
    job_of: Callable[[TraceView], AnalysisJob],
    limit: int = MAX_RECORDS_READ,
    *,
    per_job: int,
) -> Requeued:
    """Offer (AnalysisQueue.offer: never drops a queued trace) the finished traces recorded in `trace_dir` that
    `analysed` (AnalysisStore.analysed: raises StoreError) does not know, newest first, until the queue is full
    (those left: the backlog; none when it is stopping); of each (job id, user) only its `per_job`
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
    done = analysed([j.trace_id for j in kept]) if kept else set()
    left = [j for j in kept if j.trace_id not in done]
    queued = 0
    for i, job in enumerate(left):
        got = offer(job)
        if got == Offered.FULL:
            return Requeued(len(views), queued, tuple(left[i:]))
        if got == Offered.STOPPING:
            break
        queued += got == Offered.QUEUED
    return Requeued(len(views), queued)

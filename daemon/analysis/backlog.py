"""The finished traces the start-up requeue found unanalysed (requeue.py's `Requeued.backlog`), newest first,
offered one at a time by the queue's idle hook (analyses.py): so every one of them is analysed, and a live trace
waits behind at most the one backlog analysis running.

Each trace's turn asks the database whether it is analysed by then (GetTraceSummary, or the listener after its
record was rewritten, may have done it) and the queue whether it is queued or running already (Offered.ALREADY):
either way it is skipped. It lives in memory only: bounded by what the requeue read (its 1000 records, a job's
`per_job` newest), it dies with the process, and the next start finds what is still unanalysed again.
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Callable, Collection, Iterable

from dyno.daemon.analysis.queue import Offered
from dyno.daemon.analysis.work import AnalysisJob

__all__ = ["Backlog", "BacklogStep"]


class BacklogStep(enum.Enum):
    """What `Backlog.offer_next` did."""

    QUEUED = "queued"  # one trace offered and queued
    WAITING = "waiting"  # the queue took none (stopping; full only if others filled it): the trace stays first
    FINISHED = "finished"  # it has just run out (said once): each of its traces analysed, or queued by another
    EMPTY = "empty"  # nothing in it (any more)


class Backlog:
    """Not thread-safe: used on the analysis queue's thread only."""

    def __init__(self, jobs: Iterable[AnalysisJob]) -> None:
        self._jobs = collections.deque(jobs)
        self.total = len(self._jobs)
        self._finished = self.total == 0

    def __len__(self) -> int:
        return len(self._jobs)

    def offer_next(
        self, analysed: Callable[[Collection[str]], set[str]], offer: Callable[[AnalysisJob], Offered]
    ) -> BacklogStep:
        """Offer the first trace neither `analysed` (AnalysisStore.analysed: its StoreError is raised, the trace
        kept) nor queued already; those that are are dropped from the backlog on the way."""
        while self._jobs:
            job = self._jobs[0]
            if job.trace_id in analysed([job.trace_id]):
                self._jobs.popleft()
                continue
            got = offer(job)
            if got in (Offered.FULL, Offered.STOPPING):
                return BacklogStep.WAITING
            self._jobs.popleft()  # queued now, or Offered.ALREADY: its analysis is another's
            if got == Offered.QUEUED:
                return BacklogStep.QUEUED
        if self._finished:
            return BacklogStep.EMPTY
        self._finished = True
        return BacklogStep.FINISHED

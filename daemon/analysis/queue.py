"""The analyses waiting for the worker: a bounded queue (the oldest dropped, with a logged reason, when full; `offer`
takes only a free place) and one thread that runs them one at a time. Its idle hook runs on that thread each time the
queue is empty, so that what it offers (the start-up backlog: analyses.py) waits for every live job and delays a
live one by at most the one job it offered."""

from __future__ import annotations

import collections
import enum
import logging
import threading
from collections.abc import Callable

from dyno.daemon.analysis.work import AnalysisJob
from dyno.trace_summary import AnalysisState

__all__ = ["AnalysisQueue", "Offered"]

log = logging.getLogger(__name__)


class Offered(enum.Enum):
    """What `AnalysisQueue.offer` did with a job."""

    QUEUED = "queued"
    ALREADY = "already"  # its trace is queued or running already: left as it is
    FULL = "full"  # no free place: not queued, nothing dropped
    STOPPING = "stopping"  # the queue is stopping: not queued


class AnalysisQueue:
    """`run(job)` is called on the queue's own thread for each job, one at a time, oldest first; it must not
    raise (a raise is logged and the next job runs)."""

    def __init__(self, run: Callable[[AnalysisJob], None], max_queued: int) -> None:
        self._run = run
        self._max = max_queued
        self._cond = threading.Condition()
        self._queued: collections.OrderedDict[str, AnalysisJob] = collections.OrderedDict()
        self._running = ""
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self, first: Callable[[], None] | None = None, idle: Callable[[], float | None] | None = None) -> None:
        """`first` runs on the queue's thread before any job; `idle` on that thread whenever the queue is empty and
        not stopping (after `first`, and after each job), and may `offer` a job. It returns None, or the seconds (> 0)
        after which it runs again if the queue is still empty then (it could not tell what to offer); otherwise it
        runs again after the next job. A raise of either is logged; the jobs run anyway."""
        self._thread = threading.Thread(target=self._loop, args=(first, idle), name="trace-analysis", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """No job starts after this; the running one is the runner's to end (WorkerRunner.stop)."""
        with self._cond:
            self._stopping = True
            self._queued.clear()
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def submit(self, job: AnalysisJob) -> None:
        """Queue `job` (again at the end if its trace is queued already); past max_queued the oldest is dropped."""
        with self._cond:
            if self._stopping:
                return
            self._queued.pop(job.trace_id, None)
            self._queued[job.trace_id] = job
            while len(self._queued) > self._max:
                dropped, _ = self._queued.popitem(last=False)
                log.warning(
                    "trace %s: not analysed: the analysis queue is full (analysis_queue %d); GetTraceSummary of it "
                    "queues it again",
                    dropped,
                    self._max,
                )
            self._cond.notify()

    def offer(self, job: AnalysisJob) -> Offered:
        """Queue `job` only where a place is free, dropping none."""
        with self._cond:
            if self._stopping:
                return Offered.STOPPING
            if job.trace_id in self._queued or job.trace_id == self._running:
                return Offered.ALREADY
            if len(self._queued) >= self._max:
                return Offered.FULL
            self._queued[job.trace_id] = job
            self._cond.notify()
            return Offered.QUEUED

    def state_of(self, trace_id: str) -> AnalysisState | None:
        """PENDING while queued, RUNNING while its worker runs, else None."""
        with self._cond:
            if trace_id == self._running:
                return AnalysisState.RUNNING
            return AnalysisState.PENDING if trace_id in self._queued else None

    def _loop(self, first: Callable[[], None] | None, idle: Callable[[], float | None] | None) -> None:
        if first is not None:
            try:
                first()
            except Exception:
                log.exception("the analysis queue's start-up work failed")
        while True:
            with self._cond:
                if self._stopping:
                    return
                empty = not self._queued
            again = None
            if empty and idle is not None:
                try:
                    again = idle()
                except Exception:
                    log.exception("the analysis queue's idle work failed")
                if again is not None and not again > 0:  # would run it again at once, over and over
                    log.error("the analysis queue's idle hook asked to run again in %r s: after the next job", again)
                    again = None
            with self._cond:
                self._cond.wait_for(lambda: self._queued or self._stopping, again)
                if self._stopping:
                    return
                if not self._queued:  # the idle hook's time to try again
                    continue
                _, job = self._queued.popitem(last=False)
                self._running = job.trace_id
            try:
                self._run(job)
            except Exception:
                log.exception("trace %s: the analysis failed in dynod", job.trace_id)
            finally:
                with self._cond:
                    self._running = ""

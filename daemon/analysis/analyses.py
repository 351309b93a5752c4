"""Host-side analysis as dynod runs it: each finished trace of this host (the trace table's listener) is queued,
analysed by one worker process at a time (runner.py, outcome.py), and its summary kept in the job database
(store.py) for GetTraceSummary (rpc.py), ListJobs (JobRecord.latest_analysis) and Prometheus (prometheus.py).

Failure is a result, never dynod's problem: a worker that crashes, runs out of time or memory, or writes nonsense
gives a FAILED summary with the reason; a trace that wrote no file gives TRACE_FAILED without a worker. A database
that cannot be used is logged (throttled) and the summaries stay in memory (the newest MAX_RECENT, without their
rank parts) until it works again. dynod never imports dyno.trace_analysis: only the worker does.

At start, the traces of the trace dir's records that finished with no analysis stored (left queued by a restart,
finished while analysis was off) are found on the queue's thread before its first analysis (requeue.py) and become
a backlog (backlog.py), one offered each time the queue is empty (its idle hook), so that live traces go first and
wait behind at most one of them; each is remembered as the listener's are when queued (a record rewritten then
queues nothing again).

A (job, user)'s latest analysis (ListJobs, Prometheus) is its newest trace's (`trace_finished_ms`), whatever order
its traces were analysed in (store.py); the Prometheus cache and the in-memory fallback follow the same rule.
"""

from __future__ import annotations

import collections
import logging
import shutil
import threading
from collections.abc import Callable, Collection
from pathlib import Path

from dyno.daemon.analysis.backlog import Backlog, BacklogStep
from dyno.daemon.analysis.listed import listed_form
from dyno.daemon.analysis.outcome import Outcome, outcome_of
from dyno.daemon.analysis.queue import AnalysisQueue, Offered
from dyno.daemon.analysis.requeue import requeue_unanalysed
from dyno.daemon.analysis.runner import WorkerRunner
from dyno.daemon.analysis.store import AnalysisStore, Key
from dyno.daemon.analysis.work import AnalysisJob, job_of, trace_failed
from dyno.daemon.jobs.attribution import user_name
from dyno.daemon.jobs.store import StoreError
from dyno.daemon.registry import now_ms
from dyno.daemon.tracing.values import TraceView
from dyno.logthrottle import ThrottledLog
from dyno.trace_summary import AnalysisFailure, AnalysisState, TraceSummary

__all__ = ["Analyses", "MAX_RECENT"]

log = logging.getLogger(__name__)

MAX_RECENT = 64  # summaries kept in memory (for a database that cannot be used), without rank parts
_MAX_SEEN = 4096  # traces remembered as queued already (a trace's record is rewritten at each process's end)
_MAX_EXPORT_CACHE = 1024  # (job, user) -> latest summary, for Prometheus' scrapes
BACKLOG_RETRY_S = 60.0  # an idle queue asks again after a database error this long before, for the backlog's sake


class Analyses:
    def __init__(
        self,
        hostname: str,
        store: AnalysisStore,
        runner: WorkerRunner,
        *,
        max_queued: int = 16,
        name_of: Callable[[int], str] = user_name,
        clock_ms: Callable[[], int] = now_ms,
        trace_dir: Path | None = None,
    ) -> None:
        self.hostname = hostname
        self.trace_dir = trace_dir  # its records' unanalysed finished traces are analysed after start (None: not)
        self.store = store
        self.runner = runner
        self._name_of = name_of
        self._clock_ms = clock_ms
        self.queue = AnalysisQueue(self._analyse, max_queued)
        self._lock = threading.Lock()
        self._seen: collections.OrderedDict[str, tuple[str, ...]] = collections.OrderedDict()
        self._recent: collections.OrderedDict[str, TraceSummary] = collections.OrderedDict()
        self._export: collections.OrderedDict[Key, TraceSummary | None] = collections.OrderedDict()
        self._db_problems = ThrottledLog(log, every_s=600.0)
        self._backlog = Backlog(())  # the queue's thread's only (set by _requeue, served by _next_from_backlog)

    def start(self) -> None:
        trace_dir = self.trace_dir
        first = None if trace_dir is None else lambda: self._requeue(trace_dir)
        self.queue.start(first=first, idle=self._next_from_backlog)

    def stop(self) -> None:
        """The running worker's process group is killed; queued traces and the backlog are left (the next start
        finds them again: _requeue)."""
        self.runner.stop()
        self.queue.stop()

    # -- the trace table's listener (any thread; cheap: a queue put) ------------------------------------------
    def trace_finished(self, view: TraceView) -> None:
        """A finished trace (again: each rewrite of its record); queued unless queued already with the same files.
        Called on the trace manager's threads and the agent socket's event loop: it only takes a lock and queues."""
        job = job_of(view, self.hostname, self._name_of)
        with self._lock:
            if not self._remember(job):
                return
        self.queue.submit(job)  # even without files: the database is written on the queue's thread only

    def _remember(self, job: AnalysisJob) -> bool:
        """Under the lock: note `job`'s trace as queued with its files; False when it was already, with the same."""
        if self._seen.get(job.trace_id) == job.files:
            return False
        self._seen[job.trace_id] = job.files
        self._seen.move_to_end(job.trace_id)
        while len(self._seen) > _MAX_SEEN:
            self._seen.popitem(last=False)
        return True

    def analyse_again(self, job: AnalysisJob) -> TraceSummary:
        """A finished trace (``job_of`` its view) with no analysis here (dropped from a full queue, or finished
        before this dynod ran): queued now; its summary as it stands (PENDING, or TRACE_FAILED at once)."""
        self.queue.submit(job)
        if not job.files:
            return trace_failed(job, self._clock_ms())
        return job.summary(self.queue.state_of(job.trace_id) or AnalysisState.PENDING)

    # -- the queue's thread ------------------------------------------------------------------------------------
    def _requeue(self, trace_dir: Path) -> None:
        """Before the first analysis: the finished traces recorded in `trace_dir` that have no analysis stored
        become the backlog (its first offered at the queue's first idle turn)."""
        r = requeue_unanalysed(
            trace_dir,
            self.store.analysed,
            lambda view: job_of(view, self.hostname, self._name_of),
            per_job=self.store.per_job,
        )
        self._backlog = Backlog(r.backlog)
        if r.unchecked:
            self._db_problems.warning(
                "read",
                "analyses: which of the %d finished trace(s) before this start are analysed cannot be told yet (each "
                "is looked up at its turn): %s",
                len(r.backlog),
                r.unchecked,
            )
            return
        log.info(
            "analysis: %d finished trace(s) without an analysis, of %d trace record(s) read in %s: analysed newest "
            "first, one at a time while no live trace waits",
            len(r.backlog),
            r.records,
            trace_dir,
        )

    def _next_from_backlog(self) -> float | None:
        """The queue's idle hook (the queue is empty): the backlog's next trace still unanalysed is queued. Where
        the database cannot tell, it is tried again BACKLOG_RETRY_S later (or after the next analysis)."""
        try:
            step = self._backlog.offer_next(self.store.analysed, self._offer)
        except StoreError as e:
            n = len(self._backlog)
            self._db_problems.warning("read", "analyses: %d trace(s) left unanalysed before this start wait: %s", n, e)
            return BACKLOG_RETRY_S
        if step == BacklogStep.FINISHED:
            n = self._backlog.total
            log.info("analysis: the backlog is done: the %d trace(s) found at start are analysed", n)
        return None

    def _offer(self, job: AnalysisJob) -> Offered:
        """The backlog's offer: a trace it queues is remembered as the listener's are (under the
        lock with the offer, so that a rewrite of its record meanwhile is either queued by the listener or seen
        here). One queued already is the listener's, remembered with its own files."""
        with self._lock:
            got = self.queue.offer(job)
            if got == Offered.QUEUED:
                self._remember(job)
        return got

    def _analyse(self, job: AnalysisJob) -> None:
        if not job.files:  # the trace wrote none: no worker
            self._record(Outcome(trace_failed(job, self._clock_ms())))
            return
        try:
            out = self.runner.make_out_dir(job)
        except OSError as e:
            why = f"cannot prepare the analysis worker's folder: {e.strerror or e}"
            self._record(Outcome(job.summary().failed(AnalysisFailure.CRASHED, why, self._clock_ms())))
            return
        try:
            end = self.runner.run(job, out)
            if end.stopped:  # dynod stops: not the trace's failure (the next start finds it again: _requeue)
                return
            outcome = outcome_of(job, end, self._clock_ms())
        except OSError as e:
            why = f"cannot start the analysis worker: {e.strerror or e}"
            outcome = Outcome(job.summary().failed(AnalysisFailure.CRASHED, why, self._clock_ms()))
        finally:
            try:
                self.runner.remove_out_dir(out)
            except OSError:
                shutil.rmtree(out, ignore_errors=True)  # dynod's own folder: only its files are in it
        self._record(outcome)

    def _record(self, outcome: Outcome) -> None:
        s = outcome.summary
        if s.state == AnalysisState.DONE:
            log.info(
                "trace %s analysed: %d rule(s) with findings, %d rank(s), %.1f s CPU",
                s.trace_id,
                len(s.rules),
                len(s.ranks),
                s.analysis_cpu_s,
            )
        else:
            log.warning("trace %s: analysis failed: %s: %s", s.trace_id, s.failure.value, s.failure_message)
        # Stored before it is kept in memory: lookup() reads the database first, so a reader never sees the summary
        # without the rank parts the database holds (a --summaries client would merge nothing of the host).
        key = (s.job_id, s.user)
        latest = s
        try:
            self.store.save(outcome, listed_form(s), self._clock_ms())
        except StoreError as e:
            self._db_problems.warning("save", "analyses kept in memory only: %s", e)
        else:
            # the job's latest as stored now, for the Prometheus cache: not `s` when it is of an older trace than
            # one analysed before, also when that one is not cached (evicted, or no scrape since the start)
            try:
                latest = self.store.latest_summaries([key]).get(key, s)
            except StoreError as e:
                self._db_problems.warning("read", "analyses: %s", e)
        with self._lock:
            self._recent[s.trace_id] = s
            self._recent.move_to_end(s.trace_id)
            while len(self._recent) > MAX_RECENT:
                self._recent.popitem(last=False)
            self._offer_export(key, latest)

    def _offer_export(self, key: Key, s: TraceSummary) -> None:
        """Under the lock: `s` becomes the key's cached latest unless the cached one is of a newer trace (one a
        scrape read from the database meanwhile, or, without a database, one recorded before)."""
        cached = self._export.get(key)
        if cached is None or not _newer(cached, s):
            self._cache_export(key, s)

    def _cache_export(self, key: Key, s: TraceSummary | None) -> None:
        """Under the lock."""
        self._export[key] = s
        self._export.move_to_end(key)
        while len(self._export) > _MAX_EXPORT_CACHE:
            self._export.popitem(last=False)

    # -- reading -----------------------------------------------------------------------------------------------
    def state_of(self, trace_id: str) -> AnalysisState | None:
        return self.queue.state_of(trace_id)

    def lookup(self, trace_id: str) -> Outcome | None:
        """The finished analysis of a trace: from the database (with its rank parts), else from memory."""
        try:
            found = self.store.get(trace_id)
        except StoreError as e:
            self._db_problems.warning("read", "analyses: %s", e)
            found = None
        if found is not None:
            return found
        with self._lock:
            recent = self._recent.get(trace_id)
        return None if recent is None else Outcome(recent)

    def latest_listed(self, keys: set[Key]) -> dict[Key, bytes]:
        """ListJobs' latest_analysis of each (job, user) that has one (JobAccounting.latest_analyses)."""
        if not keys:
            return {}
        try:
            return self.store.latest_listed(keys)
        except StoreError as e:
            self._db_problems.warning("read", "analyses: %s", e)
        with self._lock:
            newest_last = sorted(self._recent.values(), key=lambda s: s.trace_finished_ms)  # stable: ties as recorded
        recent = {(s.job_id, s.user): s for s in newest_last}
        return {k: listed_form(recent[k]) for k in keys if k in recent}

    def latest(self, keys: Collection[Key]) -> dict[Key, TraceSummary]:
        """The latest finished analysis of each key that has one (Prometheus' series; cached per key)."""
        with self._lock:
            missing = [k for k in keys if k not in self._export]
        if missing:
            try:
                found: dict[Key, TraceSummary] | None = self.store.latest_summaries(missing)
            except StoreError:
                found = None  # not cached: asked again at the next scrape
            if found is not None:
                with self._lock:
                    for k in missing:
                        if k not in self._export:
                            self._cache_export(k, found.get(k))
        with self._lock:
            return {k: s for k in keys if (s := self._export.get(k)) is not None}


def _newer(a: TraceSummary, b: TraceSummary) -> bool:
    """`a` is of a newer trace than `b`: store.py's order, in which of two traces finished at the same time the one
    recorded last is the latest (so a tie is not newer)."""
    return a.trace_finished_ms > b.trace_finished_ms

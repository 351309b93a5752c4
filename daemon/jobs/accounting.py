"""Job accounting as dynod runs it: a sampling-tick callback feeds the JobBook; records are flushed to the JobStore
every flush_s, at each job's end and at stop; ListJobs reads the store with the running records' current values.

A database that cannot be opened or written (corrupt, read-only, full disk) never stops dynod: the problem is logged
once, shown in status (`problem()`), the running records stay in memory and ListJobs answers from them; opening is
tried again every REOPEN_S.
"""

from __future__ import annotations

import builtins
import collections
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from dyno.daemon.history import Sample
from dyno.daemon.jobs.attribution import Attributor, ProcReader
from dyno.daemon.jobs.codec import record_to_proto
from dyno.daemon.jobs.observe import CPU_EVERY_S, Observer, SimPlacement, Trainer
from dyno.daemon.jobs.prometheus import EXPORT_ENDED_S, MAX_EXPORTED_JOBS, exported
from dyno.daemon.jobs.records import JobBook, JobRecord
from dyno.daemon.jobs.store import JobQuery, JobStore, StoreError
from dyno.daemon.jobs.wire import with_latest_analysis
from dyno.daemon.registry import now_ms
from dyno.daemon.samplers.base import GpuProcess

__all__ = ["AccountingConfig", "JobAccounting", "matches"]

log = logging.getLogger(__name__)
T = TypeVar("T")

REOPEN_S = 300.0
RETENTION_EVERY_S = 600.0


@dataclass(frozen=True)
class AccountingConfig:
    state_dir: Path
    hostname: str
    interval_s: float = 1.0
    flush_s: float = 60.0
    grace_s: float = 120.0
    retention_s: float = 90 * 24 * 3600.0
    retention_bytes: int = 256 * 1024**2
    sim_gpus: int = 0  # > 0: the GPUs are simulated, and hold the registered trainers (SimPlacement)
    cpu_every_s: float = CPU_EVERY_S  # how often processes' CPU times are read


def matches(q: JobQuery, r: JobRecord) -> bool:
    return (
        (not q.since_ms or r.last_seen_ms >= q.since_ms)
        and (not q.until_ms or r.first_seen_ms <= q.until_ms)
        and (not q.job_id or r.job_id == q.job_id)
        and (not q.user or r.user == q.user)
        and (not q.running_only or r.running)
    )


class JobAccounting:
    def __init__(
        self,
        config: AccountingConfig,
        trainers: Callable[[], Sequence[Trainer]],
        gpu_processes: Callable[[], list[GpuProcess]],
        *,
        proc: ProcReader | None = None,
        set_sim_loads: Callable[[dict[int, float]], None] | None = None,
        clock_ms: Callable[[], int] = now_ms,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._trainers = trainers
        self._set_sim_loads = set_sim_loads
        self._clock_ms = clock_ms
        self._mono = monotonic
        proc = proc or ProcReader()
        placement = SimPlacement(config.sim_gpus) if config.sim_gpus > 0 else None
        self._observer = Observer(
            Attributor(proc), proc, config.interval_s, gpu_processes, placement, cpu_every_s=config.cpu_every_s
        )
        self.book = JobBook(config.hostname, config.grace_s, simulated=placement is not None)
        self._store: JobStore | None = None
        self._problem = ""
        self._next_open = 0.0
        self._next_flush = 0.0
        self._next_retention = 0.0
        self._traces_lock = threading.Lock()
        self._traces: list[tuple[int, ...]] = []  # the pids of each trace started since the last tick
        self._unsaved_ended: list[JobRecord] = []
        # ended records still exported to Prometheus for EXPORT_ENDED_S: (monotonic end time, record)
        self._recent: collections.deque[tuple[float, JobRecord]] = collections.deque(maxlen=MAX_EXPORTED_JOBS)

    # -- lifecycle --------------------------------------------------------------------------------------------
    def start(self) -> None:
        self._open()
        self._next_flush = self._mono() + self.config.flush_s

    def stop(self) -> None:
        """The last flush: running records stay running, so that the next dynod resumes them."""
        self.flush(final=True)
        if self._store is not None:
            self._store.close()
            self._store = None

    def problem(self) -> str:
        """Empty while the database works, else why not (GetStatus' job_store)."""
        return self._problem

    def _fail(self, e: StoreError) -> None:
        if not self._problem:
            log.error("%s; job records are kept in memory only until it works again (tried every %.0f s)", e, REOPEN_S)
        self._problem = str(e)
        if self._store is not None:
            try:
                self._store.close()
            except Exception:
                pass
            self._store = None
        self._next_open = self._mono() + REOPEN_S

    def _open(self) -> bool:
        try:
            self.config.state_dir.mkdir(parents=True, exist_ok=True)
            store = JobStore.in_dir(self.config.state_dir)
            resumed = store.running(self._clock_ms(), int(self.config.grace_s * 1000))
        except OSError as e:
            self._fail(StoreError(f"job database in {self.config.state_dir}: {e.strerror or e}"))
            return False
        except StoreError as e:
            self._fail(e)
            return False
        if self._problem:
            log.info("job database %s works again", store.path)
        self._store, self._problem = store, ""
        known = {r.key for r in self.book.records()}
        self.book.resume(r for r in resumed if r.key not in known)
        if resumed:
            log.info("job accounting: resumed %d running job record(s)", len(resumed))
        return True

    # -- the sampling tick ------------------------------------------------------------------------------------
    def trace_taken(self, pids: Sequence[int]) -> None:
        """A trace was started for these processes (the trace manager's callback; any thread)."""
        with self._traces_lock:
            if len(self._traces) < 10_000:  # bounded between ticks, whatever the request rate
                self._traces.append(tuple(pids))

    def on_tick(self, sample: Sample) -> None:
        with self._traces_lock:
            traces, self._traces = self._traces, []
        obs = self._observer.observe(sample, self._trainers(), traces)
        ended = self.book.observe(obs)
        if self._set_sim_loads is not None:
            self._set_sim_loads(self._observer.sim_loads())
        now = self._mono()
        self._recent.extend((now, r) for r in ended)
        if ended or now >= self._next_flush:
            self._unsaved_ended.extend(ended)
            self.flush()
            self._next_flush = now + self.config.flush_s

    def flush(self, final: bool = False) -> None:
        if self._store is None and (final or self._mono() < self._next_open or not self._open()):
            self._unsaved_ended = self._unsaved_ended[-1000:]
            return
        assert self._store is not None
        records = [*self._unsaved_ended, *self.book.records()]
        try:
            new_ids = self._store.save(records)
            self._unsaved_ended = []
            for key, rid in new_ids.items():
                self.book.set_record_id(key, rid)
            now = self._mono()
            if now >= self._next_retention:
                self._next_retention = now + RETENTION_EVERY_S
                self._store.enforce_retention(self._clock_ms(), self.config.retention_s, self.config.retention_bytes)
        except StoreError as e:
            self._fail(e)

    def exported_records(self) -> list[JobRecord]:
        """What Prometheus gets: the running records, and the ended ones for EXPORT_ENDED_S (bounded)."""
        live = self.book.records()
        keys = {r.key for r in live}
        now = self._mono()
        ended = [r for t, r in list(self._recent) if now - t < EXPORT_ENDED_S and r.key not in keys]
        latest = {r.key: r for r in ended}  # a job that ended twice in the window: its last record
        return exported(live, list(latest.values()))

    # -- reading ----------------------------------------------------------------------------------------------
    def gpu_holders(self) -> Mapping[int, tuple[str, ...]]:
        """GPU index -> the job ids holding it at the last tick (the DCGM-compatible view's `hpc_job`)."""
        return self.book.gpu_holders()

    def list(self, q: JobQuery, after_id: int, limit: int) -> tuple[list[JobRecord], int]:
        """Up to `limit` records matching q after record `after_id`; and the id to continue after (0: no more).
        Running records carry their values as of the last tick. Without a database: the running ones only."""
        store = self._store
        stored = None if store is None else lambda: [(r.record_id, r) for r in store.query(q, after_id, limit + 1)]
        return self._page(q, limit, stored, lambda r: r)

    def list_encoded(self, q: JobQuery, after_id: int, limit: int) -> tuple[builtins.list[bytes], int]:
        """list() as each record's encoded wire message (ListJobs' answer is joined from them: jobs/wire.py), with
        its job's latest analysis (`latest_analyses`) appended."""
        store = self._store
        latest: dict[tuple[str, str], bytes] = {}  # from the database's rows: a running record's too
        in_db: set[tuple[str, str]] = set()  # keys whose latest analysis the rows' query looked up already

        def stored() -> builtins.list[tuple[int, tuple[tuple[str, str], bytes]]]:
            assert store is not None
            rows = store.query_encoded(q, after_id, limit + 1)
            latest.update((key, summary) for _, (key, _, summary) in rows if summary)
            in_db.update(key for _, (key, _, _) in rows)
            return [(rid, (key, data)) for rid, (key, data, _) in rows]

        keyed, after = self._page(q, limit, None if store is None else stored, lambda r: (r.key, _encoded(r)))
        # records the rows did not have (running ones new since the last flush; every record without a database):
        # their analyses by key (the analyses' table, or what dynod keeps in memory without a database)
        missing = {key for key, _ in keyed if key not in in_db}
        if missing and self.latest_analyses is not None:
            latest.update(self.latest_analyses(missing))
        return [with_latest_analysis(data, latest[key]) if key in latest else data for key, data in keyed], after

    # (job id, user) keys -> the encoded dyno.v1.TraceSummary of each one's latest finished analysis, as ListJobs
    # sends it, for answers without the database (dyno.daemon.analysis keeps the newest in memory); set once before
    # ListJobs is served
    latest_analyses: Callable[[set[tuple[str, str]]], Mapping[tuple[str, str], bytes]] | None = None

    def store(self) -> JobStore | None:
        """The open database, None while it cannot be used (the analyses' table lives in it too)."""
        return self._store

    def _page(
        self,
        q: JobQuery,
        limit: int,
        stored: Callable[[], builtins.list[tuple[int, T]]] | None,
        convert: Callable[[JobRecord], T],
    ) -> tuple[builtins.list[T], int]:
        """One page: `stored()` gives (record id, record) of up to limit + 1 stored records; a running one is
        answered with its values of the last tick (`convert`ed)."""
        live = self.book.records()
        if stored is not None:
            try:
                rows: builtins.list[tuple[int, T]] | None = stored()
            except StoreError as e:
                log.warning("%s", e)
                rows = None
            if rows is not None:
                fresh = {r.record_id: r for r in live if r.record_id}
                out = []
                for rid, m in rows[:limit]:
                    r = fresh.get(rid)
                    if r is None:
                        out.append(m)
                    elif matches(q, r):
                        out.append(convert(r))
                more = len(rows) > limit
                if not more:  # running records the database does not have yet (new since the last flush)
                    out += [convert(r) for r in live if not r.record_id and matches(q, r)]
                return out, rows[limit - 1][0] if more else 0
        unsaved = [replace(r, record_id=0) for r in self._unsaved_ended]
        return [convert(r) for r in (*unsaved, *live) if matches(q, r)][:limit], 0


def _encoded(r: JobRecord) -> bytes:
    return record_to_proto(r).SerializeToString()

"""The analyses' table of the job database (its schema: dyno.daemon.jobs.store.MIGRATIONS): one row per finished
analysis (trace id, job, user, host, state, finished time, the trace's own finished time, the summary as JSON, its
ListJobs form, the rank parts).

A (job, user)'s latest analysis is its newest trace's: the greatest `trace_finished_ms`, then the one saved last
(rows written before that column take their summary's), whatever order the traces were analysed in (a restart's
requeue queues the newest first; GetTraceSummary analyses an old trace on demand). Bounded at each save: rows
older than the job records' retention go, a job keeps the analysis just saved and its `per_job` - 1 newest traces'
others, and all rows together take at most `max_bytes` (the oldest traces' go first, never the row just saved; the
total is kept by the schema's triggers in `analyses_bytes`). Every method raises StoreError
when the database cannot be used (the caller keeps dynod going: analyses.py)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

from dyno.daemon.analysis.outcome import Outcome
from dyno.daemon.jobs.store import JobStore, StoreError
from dyno.trace_summary import SummaryFormatError, TraceSummary

__all__ = ["AnalysisStore", "Key"]

Key = tuple[str, str]  # (job id, user), as job records are keyed
_CHUNK = 200  # keys per query (two parameters each)
_NEWEST = "ORDER BY trace_finished_ms DESC, id DESC"  # a job's analyses, its newest trace's first (analyses_job_newest)
_OLDEST = "ORDER BY trace_finished_ms, id"  # every analysis, the oldest trace's first (analyses_trace_time)
T = TypeVar("T")


def _unavailable() -> StoreError:
    return StoreError("the job database is not open (see GetStatus' job_store)")


def _summary(text: str) -> TraceSummary:
    try:
        return TraceSummary.from_json(json.loads(text))
    except (ValueError, SummaryFormatError) as e:  # a row this dynod did not write
        raise StoreError(f"job database: an analysis row does not read back: {e}") from None


class AnalysisStore:
    def __init__(
        self, store: Callable[[], JobStore | None], *, retention_s: float, max_bytes: int, per_job: int = 20
    ) -> None:
        self._store = store  # the job accounting's open database, None while it cannot be used
        self.retention_s = retention_s
        self.max_bytes = max_bytes
        self.per_job = per_job

    def _db(self) -> JobStore:
        db = self._store()
        if db is None:
            raise _unavailable()
        return db

    def save(self, outcome: Outcome, listed: bytes, now_ms: int) -> None:
        s = outcome.summary
        text = json.dumps(s.to_json(), allow_nan=False)
        size = len(text) + len(listed) + len(outcome.rank_parts)
        row = (s.trace_id, s.job_id, s.user, s.hostname, s.state.value, s.analyzed_ms or now_ms, s.trace_finished_ms)

        def write(conn: sqlite3.Connection) -> None:
            new = conn.execute(
                "INSERT INTO analyses (trace_id, job_id, user, hostname, state, finished_ms, trace_finished_ms, "
                "summary, listed, rank_parts, thinned, bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*row, text, listed, outcome.rank_parts, int(outcome.thinned), size),
            ).lastrowid
            conn.execute("DELETE FROM analyses WHERE finished_ms < ?", (now_ms - int(self.retention_s * 1000),))
            # the job keeps the row just saved (an older trace's, analysed when asked for, is read back at once)
            # and its per_job - 1 newest others
            conn.execute(
                "DELETE FROM analyses WHERE job_id = ? AND user = ? AND id != ? AND id NOT IN (SELECT id FROM "
                f"analyses WHERE job_id = ? AND user = ? AND id != ? {_NEWEST} LIMIT ?)",
                (s.job_id, s.user, new, s.job_id, s.user, new, max(self.per_job - 1, 0)),
            )
            total = int(conn.execute("SELECT total FROM analyses_bytes").fetchone()[0])
            if total > self.max_bytes:
                cut: list[tuple[int]] = []
                oldest = conn.execute(f"SELECT id, bytes FROM analyses WHERE id != ? {_OLDEST}", (new,))
                for rid, n in oldest:  # read a row at a time: only as many as the budget needs
                    if total <= self.max_bytes:
                        break
                    total -= n
                    cut.append((rid,))
                oldest.close()
                conn.executemany("DELETE FROM analyses WHERE id = ?", cut)

        self._db().write(write)

    def get(self, trace_id: str) -> Outcome | None:
        """The newest analysis of a trace id (a reused id: the latest trace's)."""
        row = self._db().read(
            lambda c: c.execute(
                f"SELECT summary, rank_parts, thinned FROM analyses WHERE trace_id = ? {_NEWEST} LIMIT 1",
                (trace_id,),
            ).fetchone()
        )
        return None if row is None else Outcome(_summary(row[0]), bytes(row[1]), bool(row[2]))

    def analysed(self, trace_ids: Collection[str]) -> set[str]:
        """Those of `trace_ids` that have an analysis stored (analyses_trace: one indexed look-up each)."""

        def query(chunk: Sequence[str]) -> tuple[str, list[object]]:
            marks = ", ".join("?" for _ in chunk)
            return f"SELECT DISTINCT trace_id FROM analyses WHERE trace_id IN ({marks})", list(chunk)

        return {r[0] for r in self._in_chunks(list(trace_ids), query)}

    def latest_listed(self, keys: Collection[Key]) -> dict[Key, bytes]:
        """Each key's latest analysis (its newest trace's) in its ListJobs form."""
        return {(job, user): bytes(v) for job, user, v in self._latest(keys, "listed")}

    def latest_summaries(self, keys: Collection[Key]) -> dict[Key, TraceSummary]:
        """Each key's latest analysis (its newest trace's)."""
        return {(job, user): _summary(v) for job, user, v in self._latest(keys, "summary")}

    def _latest(self, keys: Collection[Key], column: str) -> list[tuple[Any, ...]]:
        """(job id, user, `column`) of each key's newest row: one index search per key (analyses_job_newest)."""

        def query(chunk: Sequence[Key]) -> tuple[str, list[object]]:
            values = ", ".join("(?, ?)" for _ in chunk)
            sql = (
                f"WITH k(job_id, user) AS (VALUES {values}) SELECT a.job_id, a.user, a.{column} FROM k JOIN analyses "
                f"a ON a.id = (SELECT id FROM analyses WHERE job_id = k.job_id AND user = k.user {_NEWEST} LIMIT 1)"
            )
            return sql, [v for k in chunk for v in k]

        return self._in_chunks(list(keys), query)

    def _in_chunks(
        self, items: Sequence[T], query: Callable[[Sequence[T]], tuple[str, list[object]]]
    ) -> list[tuple[Any, ...]]:
        """The rows of `query(chunk)` (its SQL and parameters) over `items` _CHUNK at a time (SQLite's bound on a
        statement's parameters)."""
        rows: list[tuple[Any, ...]] = []
        for i in range(0, len(items), _CHUNK):
            sql, params = query(items[i : i + _CHUNK])
            rows += self._db().read(lambda c: c.execute(sql, params).fetchall())  # noqa: B023 (called at once)
        return rows

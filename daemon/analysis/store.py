"""The analyses' table of the job database (its schema: dyno.daemon.jobs.store.MIGRATIONS): one row per finished
analysis (trace id, job, user, host, state, finished time, the summary as JSON, its ListJobs form, the rank parts).

Bounded at each save: rows older than the job records' retention go, a job keeps its newest `per_job`, and all
rows together take at most `max_bytes` (the oldest go first). Every method raises StoreError when the database
cannot be used (the caller keeps dynod going: analyses.py)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Iterable
from typing import Any

from dyno.daemon.analysis.outcome import Outcome
from dyno.daemon.jobs.store import JobStore, StoreError
from dyno.trace_summary import SummaryFormatError, TraceSummary

__all__ = ["AnalysisStore", "Key"]

Key = tuple[str, str]  # (job id, user), as job records are keyed
_CHUNK = 200  # keys per query (two parameters each)


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
        row = (s.trace_id, s.job_id, s.user, s.hostname, s.state.value, s.analyzed_ms or now_ms, text, listed)

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO analyses (trace_id, job_id, user, hostname, state, finished_ms, summary, listed, "
                "rank_parts, thinned, bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*row, outcome.rank_parts, int(outcome.thinned), size),
            )
            conn.execute("DELETE FROM analyses WHERE finished_ms < ?", (now_ms - int(self.retention_s * 1000),))
            conn.execute(
                "DELETE FROM analyses WHERE job_id = ? AND user = ? AND id NOT IN (SELECT id FROM analyses WHERE "
                "job_id = ? AND user = ? ORDER BY id DESC LIMIT ?)",
                (s.job_id, s.user, s.job_id, s.user, self.per_job),
            )
            total = int(conn.execute("SELECT COALESCE(SUM(bytes), 0) FROM analyses").fetchone()[0])
            if total > self.max_bytes:
                cut = 0
                for rid, n in conn.execute("SELECT id, bytes FROM analyses ORDER BY id"):
                    if total <= self.max_bytes:
                        break
                    total -= n
                    cut = rid
                conn.execute("DELETE FROM analyses WHERE id <= ?", (cut,))

        self._db().write(write)

    def get(self, trace_id: str) -> Outcome | None:
        """The newest analysis of a trace id (a reused id: the latest trace's)."""
        row = self._db().read(
            lambda c: c.execute(
                "SELECT summary, rank_parts, thinned FROM analyses WHERE trace_id = ? ORDER BY id DESC LIMIT 1",
                (trace_id,),
            ).fetchone()
        )
        return None if row is None else Outcome(_summary(row[0]), bytes(row[1]), bool(row[2]))

    def analysed(self, trace_ids: Collection[str]) -> set[str]:
        """Those of `trace_ids` that have an analysis stored (analyses_trace: one indexed look-up each)."""
        ids = list(trace_ids)
        found: set[str] = set()
        for i in range(0, len(ids), _CHUNK):
            chunk = ids[i : i + _CHUNK]
            sql = f"SELECT DISTINCT trace_id FROM analyses WHERE trace_id IN ({', '.join('?' for _ in chunk)})"
            rows = self._db().read(lambda c: c.execute(sql, chunk).fetchall())  # noqa: B023 (called at once)
            found.update(r[0] for r in rows)
        return found

    def latest_listed(self, keys: Collection[Key]) -> dict[Key, bytes]:
        """Each key's newest analysis in its ListJobs form."""
        return {k: bytes(v) for k, v in self._latest(keys, "listed")}

    def latest_summaries(self, keys: Collection[Key]) -> dict[Key, TraceSummary]:
        return {k: _summary(v) for k, v in self._latest(keys, "summary")}

    def _latest(self, keys: Collection[Key], column: str) -> Iterable[tuple[Key, Any]]:
        keys = list(keys)
        out: list[tuple[Key, Any]] = []
        for i in range(0, len(keys), _CHUNK):
            chunk = keys[i : i + _CHUNK]
            values = ", ".join("(?, ?)" for _ in chunk)
            sql = (
                f"SELECT a.job_id, a.user, a.{column} FROM analyses a JOIN (SELECT MAX(id) AS m FROM analyses WHERE "
                f"(job_id, user) IN (VALUES {values}) GROUP BY job_id, user) l ON a.id = l.m"
            )
            params = [v for k in chunk for v in k]
            rows = self._db().read(lambda c: c.execute(sql, params).fetchall())  # noqa: B023 (called at once)
            out += [((job, user), value) for job, user, value in rows]
        return out

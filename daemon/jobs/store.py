"""Job records in SQLite under state_dir (stdlib sqlite3, WAL, a schema version with forward migrations).

One row per job and user of this host: the columns ListJobs filters and pages on, and the whole record as an
encoded dyno.v1 JobRecord (`data`; the columns override its fields of the same name), so that a field added to the
record needs no migration. Rows are written by the sampling thread's
flushes and read by ListJobs' RPC threads, each through its own connection (WAL: readers never block the writer).
Every sqlite3/OS error becomes a StoreError with a message an operator can act on.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from google.protobuf.message import DecodeError

from dyno.daemon.jobs.codec import record_from_proto, record_to_proto
from dyno.daemon.jobs.records import JobRecord
from dyno.daemon.jobs.wire import stored_record
from dyno.v1 import dyno_pb2

T = TypeVar("T")

__all__ = ["SCHEMA_VERSION", "MIGRATIONS", "JobQuery", "JobStore", "KeyedRecord", "StoreError", "DB_NAME"]

DB_NAME = "jobs.sqlite3"
BUSY_TIMEOUT_MS = 2000  # a reader never holds the writer longer (WAL); a stuck one must not stall sampling for long

# MIGRATIONS[i] takes a database of schema version i to i + 1; never edit one that shipped, add the next
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE jobs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            job_id TEXT NOT NULL,
            user TEXT NOT NULL,
            hostname TEXT NOT NULL,
            first_seen_ms INTEGER NOT NULL,
            last_seen_ms INTEGER NOT NULL,
            running INTEGER NOT NULL,
            data BLOB NOT NULL
        )""",
    ),
    (
        "CREATE INDEX jobs_last_seen ON jobs (last_seen_ms)",
        "CREATE INDEX jobs_job_id ON jobs (job_id)",
        "CREATE INDEX jobs_running ON jobs (running) WHERE running = 1",
    ),
    # a local user's ListJobs always filters by its user (jobs/service.py): a page without scanning every record
    ("CREATE INDEX jobs_user ON jobs (user)",),
    # the host-side analyses of this host's traces (dyno.daemon.analysis.store: its SQL, its retention)
    (
        """CREATE TABLE analyses (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            trace_id TEXT NOT NULL,
            job_id TEXT NOT NULL,
            user TEXT NOT NULL,
            hostname TEXT NOT NULL,
            state TEXT NOT NULL,
            finished_ms INTEGER NOT NULL,
            summary TEXT NOT NULL,
            listed BLOB NOT NULL,
            rank_parts BLOB NOT NULL,
            thinned INTEGER NOT NULL,
            bytes INTEGER NOT NULL
        )""",
        "CREATE INDEX analyses_trace ON analyses (trace_id)",
        "CREATE INDEX analyses_job ON analyses (job_id, user, id)",
        "CREATE INDEX analyses_finished ON analyses (finished_ms)",
    ),
    # a job's latest analysis is its newest trace's, whatever order traces were analysed in (a restart's requeue,
    # GetTraceSummary of an old trace): the rows written before take the time their summary holds (0 where it has
    # none: they order among themselves by id); the index serves the per-job "newest" (ORDER BY trace_finished_ms
    # DESC, id DESC) and replaces (job_id, user, id)
    (
        "ALTER TABLE analyses ADD COLUMN trace_finished_ms INTEGER NOT NULL DEFAULT 0",
        "UPDATE analyses SET trace_finished_ms = COALESCE(json_extract(summary, '$.trace_finished_ms'), 0)",
        "CREATE INDEX analyses_job_newest ON analyses (job_id, user, trace_finished_ms, id)",
        "DROP INDEX analyses_job",
    ),
    # the analyses' byte budget (analysis/store.py): its running total, kept by triggers in the transaction of each
    # row's insert or delete (a SUM over every row took ~14 ms of each ~16 ms save at 50,000 rows), and the oldest
    # traces' rows found first when it is exceeded
    (
        "CREATE TABLE analyses_bytes (total INTEGER NOT NULL)",
        "INSERT INTO analyses_bytes (total) SELECT COALESCE(SUM(bytes), 0) FROM analyses",
        "CREATE TRIGGER analyses_bytes_insert AFTER INSERT ON analyses "
        "BEGIN UPDATE analyses_bytes SET total = total + NEW.bytes; END",
        "CREATE TRIGGER analyses_bytes_delete AFTER DELETE ON analyses "
        "BEGIN UPDATE analyses_bytes SET total = total - OLD.bytes; END",
        "CREATE INDEX analyses_trace_time ON analyses (trace_finished_ms, id)",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)
_COLUMNS = ("job_id", "user", "hostname", "first_seen_ms", "last_seen_ms", "running")


class StoreError(Exception):
    """The job database cannot be opened, read or written; the message says why."""


# SQLite's primary result codes of a file that is not a database or is damaged (sqlite3 has them since 3.11)
_CORRUPT_CODES = frozenset({getattr(sqlite3, "SQLITE_CORRUPT", 11), getattr(sqlite3, "SQLITE_NOTADB", 26)})


def _error(path: Path, what: str, e: BaseException) -> StoreError:
    text = str(e)
    code = getattr(e, "sqlite_errorcode", None)  # extended result code; the primary one is its low byte
    if isinstance(e, sqlite3.DatabaseError) and code is not None and code & 0xFF in _CORRUPT_CODES:
        text += " (corrupt: move it aside and dynod starts a new one)"
    return StoreError(f"job database {path}: cannot {what}: {text}")


@dataclass(frozen=True)
class JobQuery:
    """ListJobs' filters: jobs seen in [since_ms, until_ms] (0: open), of this id / user ("" any), running only."""

    since_ms: int = 0
    until_ms: int = 0
    job_id: str = ""
    user: str = ""
    running_only: bool = False


def _to_row(r: JobRecord) -> tuple[object, ...]:
    data = record_to_proto(replace(r, record_id=0)).SerializeToString()
    return (r.job_id, r.user, r.hostname, r.first_seen_ms, r.last_seen_ms, int(r.running), data)


def _proto_from_row(row: tuple[Any, ...]) -> dyno_pb2.JobRecord:
    rid, job_id, user, hostname, first, last, running, data = row
    m = dyno_pb2.JobRecord.FromString(bytes(data))
    m.record_id, m.job_id, m.user, m.hostname = rid, job_id, user, hostname
    m.first_seen_ms, m.last_seen_ms, m.running = first, last, bool(running)
    if not running:
        m.gpus_held = 0
    return m


# A row whose encoding may say running while its column says ended (closed by running(): the columns override the
# encoding). Every running record's encoding holds running = true (field 6: bytes 30 01) and an ended one's holds
# neither it nor gpus_held, so the rows this misses agree; the few it finds by chance (the bytes inside another
# field) are only parsed needlessly.
_STALE_SQL = "running = 0 AND instr(data, x'3001') > 0"


# The latest analysis of a row's job (dyno.daemon.analysis.store: its newest trace's), in its ListJobs form: one
# index search per row (analyses_job_newest), ~3 µs, in SQLite's loop rather than a query per key
_LATEST_SQL = (
    "(SELECT listed FROM analyses a WHERE a.job_id = jobs.job_id AND a.user = jobs.user "
    "ORDER BY a.trace_finished_ms DESC, a.id DESC LIMIT 1)"
)
# (job id, user), the encoded JobRecord, the encoded TraceSummary of its job's latest analysis (b"": none)
KeyedRecord = tuple[tuple[str, str], bytes, bytes]


def _encoded_from_row(row: tuple[Any, ...]) -> tuple[int, KeyedRecord]:
    key, latest = (row[1], row[2]), b"" if row[9] is None else bytes(row[9])
    if row[8]:
        return row[0], (key, _proto_from_row(row[:8]).SerializeToString(), latest)
    return row[0], (key, stored_record(row[7], row[0]), latest)


def _from_row(row: tuple[Any, ...]) -> JobRecord:
    return record_from_proto(_proto_from_row(row))


def migrate(conn: sqlite3.Connection, path: Path) -> int:
    """Bring the database to SCHEMA_VERSION; returns the version it had. A newer one than this dynod knows is
    refused (an older dynod must not write records it cannot read whole)."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"job database {path}: schema version {version} is newer than this dynod's {SCHEMA_VERSION} (a newer "
            "dynod wrote it); upgrade dynod or move the file aside"
        )
    for v in range(version, SCHEMA_VERSION):
        with conn:
            # sqlite3's implicit BEGIN comes only before DML: a CREATE or ALTER before it would commit on its own and
            # stay behind a failed step, failing every later start ("already exists"); SQLite's DDL is transactional
            conn.execute("BEGIN")
            for statement in MIGRATIONS[v]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {v + 1}")
    return version


class JobStore:
    """The database file under a state dir. Methods raise StoreError; safe from several threads (one writer
    connection under a lock, a reader connection per thread)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._local = threading.local()
        try:
            self._conn = self._connect()
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            migrate(self._conn, path)
        except (sqlite3.Error, OSError) as e:
            raise _error(path, "open it", e) from None

    @classmethod
    def in_dir(cls, state_dir: Path) -> JobStore:
        return cls(state_dir / DB_NAME)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        return conn

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    def write(self, what: Callable[[sqlite3.Connection], T]) -> T:
        """`what` on the writer connection, in one transaction (for the other tables of this database, e.g.
        dyno.daemon.analysis.store); StoreError on any database error."""
        try:
            with self._lock, self._conn:
                return what(self._conn)
        except (sqlite3.Error, OSError) as e:
            raise _error(self.path, "write", e) from None

    def read(self, what: Callable[[sqlite3.Connection], T]) -> T:
        """`what` on this thread's reader connection; StoreError on any database error."""
        try:
            return what(self._reader())
        except (sqlite3.Error, OSError) as e:
            raise _error(self.path, "read", e) from None

    def save(self, records: Iterable[JobRecord]) -> dict[tuple[str, str], int]:
        """Insert the records without an id and update the others, in one transaction; returns the new ids."""
        new: dict[tuple[str, str], int] = {}

        def put(conn: sqlite3.Connection) -> None:
            for r in records:
                if r.record_id:
                    conn.execute(
                        "UPDATE jobs SET job_id=?, user=?, hostname=?, first_seen_ms=?, last_seen_ms=?, running=?, "
                        "data=? WHERE id=?",
                        (*_to_row(r), r.record_id),
                    )
                else:
                    cur = conn.execute(
                        "INSERT INTO jobs (job_id, user, hostname, first_seen_ms, last_seen_ms, running, data) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)",
                        _to_row(r),
                    )
                    new[r.key] = int(cur.lastrowid or 0)

        self.write(put)
        return new

    def running(self, now_ms: int, grace_ms: int) -> list[JobRecord]:
        """The records left running (by a dynod that stopped or was killed): those seen within `grace_ms` go on;
        older ones are closed, since their jobs ended while no dynod watched."""
        try:
            with self._lock, self._conn:
                self._conn.execute(
                    "UPDATE jobs SET running = 0 WHERE running = 1 AND last_seen_ms < ?", (now_ms - grace_ms,)
                )
                rows = self._conn.execute("SELECT id, " + ", ".join(_COLUMNS) + ", data FROM jobs WHERE running = 1")
                return [_from_row(row) for row in rows]
        except (sqlite3.Error, OSError, ValueError, DecodeError) as e:
            raise _error(self.path, "read", e) from None

    def query(self, q: JobQuery, after_id: int = 0, limit: int = 100) -> list[JobRecord]:
        """Records matching `q` with ids above `after_id`, in id order, at most `limit`."""
        return self._query(q, after_id, limit, _from_row)

    def query_protos(self, q: JobQuery, after_id: int = 0, limit: int = 100) -> list[dyno_pb2.JobRecord]:
        """query() as the wire messages (what ListJobs sends: no conversion field by field)."""
        return self._query(q, after_id, limit, _proto_from_row)

    def query_encoded(self, q: JobQuery, after_id: int = 0, limit: int = 100) -> list[tuple[int, KeyedRecord]]:
        """query() as (record id, ((job id, user), the encoded wire message, its latest analysis)): ListJobs' answer
        is joined from them (jobs/wire.py)."""
        return self._query(q, after_id, limit, _encoded_from_row, f", {_STALE_SQL}, {_LATEST_SQL}")

    def _query(
        self, q: JobQuery, after_id: int, limit: int, convert: Callable[[tuple[Any, ...]], T], extra: str = ""
    ) -> list[T]:
        """`extra`: more columns selected after data (SQL)."""
        where, args = ["id > ?"], [after_id]
        if q.since_ms:
            where.append("last_seen_ms >= ?")
            args.append(q.since_ms)
        if q.until_ms:
            where.append("first_seen_ms <= ?")
            args.append(q.until_ms)
        if q.running_only:
            where.append("running = 1")
        sql = "SELECT id, " + ", ".join(_COLUMNS) + ", data" + extra + " FROM jobs WHERE " + " AND ".join(where)
        params: list[object] = list(args)
        if q.job_id:
            sql += " AND job_id = ?"
            params.append(q.job_id)
        if q.user:
            sql += " AND user = ?"
            params.append(q.user)
        sql += " ORDER BY id LIMIT ?"
        params.append(limit)
        try:
            return [convert(row) for row in self._reader().execute(sql, params)]
        except (sqlite3.Error, OSError, ValueError, DecodeError) as e:
            raise _error(self.path, "read", e) from None

    def enforce_retention(self, now_ms: int, max_age_s: float, max_bytes: int) -> int:
        """Delete ended records last seen more than `max_age_s` ago, then the oldest ended ones while the file is
        larger than `max_bytes`; returns how many went. Running records always stay."""
        removed = 0
        try:
            with self._lock:
                with self._conn:
                    cur = self._conn.execute(
                        "DELETE FROM jobs WHERE running = 0 AND last_seen_ms < ?", (now_ms - int(max_age_s * 1000),)
                    )
                    removed += cur.rowcount
                while self._used_bytes() > max_bytes:
                    with self._conn:
                        cur = self._conn.execute(
                            "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE running = 0 ORDER BY last_seen_ms "
                            "LIMIT 1000)"
                        )
                    if cur.rowcount <= 0:
                        break
                    removed += cur.rowcount
                if removed:
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except (sqlite3.Error, OSError) as e:
            raise _error(self.path, "apply retention", e) from None
        return removed

    def _used_bytes(self) -> int:
        """Bytes the rows take: pages in use (the file keeps freed pages for reuse rather than shrink)."""
        pages = int(self._conn.execute("PRAGMA page_count").fetchone()[0])
        free = int(self._conn.execute("PRAGMA freelist_count").fetchone()[0])
        size = int(self._conn.execute("PRAGMA page_size").fetchone()[0])
        return (pages - free) * size

    def close(self) -> None:
        with self._lock:
            self._conn.close()

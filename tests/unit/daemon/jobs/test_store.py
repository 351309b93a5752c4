"""The job database: save and page, resume running records, migrations, retention, bad files."""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from dyno.daemon.analysis.listed import listed_form
from dyno.daemon.analysis.outcome import Outcome
from dyno.daemon.analysis.store import AnalysisStore
from dyno.daemon.jobs import store as job_store
from dyno.daemon.jobs.records import JobRecord
from dyno.daemon.jobs.store import MIGRATIONS, SCHEMA_VERSION, JobQuery, JobStore, StoreError, _error
from dyno.trace_summary import AnalysisState, TraceSummary
from dyno.v1 import dyno_pb2


def rec(job_id: str, user: str = "alice", first: int = 0, last: int = 1000, running: bool = True) -> JobRecord:
    return JobRecord(job_id, user, "h", first, last, running, gpu_seconds=12.5, pids=(1, 2), ranks=(0,))


def test_saved_records_come_back_whole_and_updates_keep_their_row(tmp_path: Path) -> None:
    store = JobStore.in_dir(tmp_path)
    ids = store.save([rec("a"), rec("b", user="bob")])
    assert set(ids) == {("a", "alice"), ("b", "bob")}
    (a,) = store.query(JobQuery(job_id="a"))
    assert (a.gpu_seconds, a.pids, a.ranks, a.record_id) == (12.5, (1, 2), (0,), ids[("a", "alice")])
    store.save([replace(a, gpu_seconds=20.0, last_seen_ms=5000)])
    (a2,) = store.query(JobQuery(job_id="a"))
    assert (a2.gpu_seconds, a2.last_seen_ms, a2.record_id) == (20.0, 5000, a.record_id)
    assert [r.job_id for r in store.query(JobQuery(user="bob"))] == ["b"]


def test_query_filters_and_pages_in_id_order(tmp_path: Path) -> None:
    store = JobStore.in_dir(tmp_path)
    store.save([rec(f"j{i}", first=i * 1000, last=i * 1000 + 500, running=i % 2 == 0) for i in range(10)])
    page1 = store.query(JobQuery(), 0, 4)
    page2 = store.query(JobQuery(), page1[-1].record_id, 4)
    page3 = store.query(JobQuery(), page2[-1].record_id, 4)
    assert [r.job_id for r in page1 + page2 + page3] == [f"j{i}" for i in range(10)]
    assert [r.job_id for r in store.query(JobQuery(since_ms=7000))] == ["j7", "j8", "j9"]
    assert [r.job_id for r in store.query(JobQuery(until_ms=1000))] == ["j0", "j1"]
    assert [r.job_id for r in store.query(JobQuery(running_only=True))] == ["j0", "j2", "j4", "j6", "j8"]


def test_running_resumes_recent_records_and_closes_stale_ones(tmp_path: Path) -> None:
    store = JobStore.in_dir(tmp_path)
    store.save([rec("old", last=1000), rec("recent", last=99_000), rec("done", last=99_000, running=False)])
    store.close()
    again = JobStore.in_dir(tmp_path)
    assert [r.job_id for r in again.running(now_ms=100_000, grace_ms=5000)] == ["recent"]
    assert [r.running for r in again.query(JobQuery(job_id="old"))] == [False]


def _old_database(path: Path, version: int, job_id: str, user: str, record: dyno_pb2.JobRecord) -> sqlite3.Connection:
    """A job database at schema `version` (its first `version` migrations) holding one ended job of `user` on host
    "h"; the connection left open, nothing committed."""
    conn = sqlite3.connect(path)
    for migration in MIGRATIONS[:version]:
        for statement in migration:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.execute(
        "INSERT INTO jobs (job_id, user, hostname, first_seen_ms, last_seen_ms, running, data) "
        "VALUES (?, ?, 'h', 0, 10, 0, ?)",
        (job_id, user, record.SerializeToString()),
    )
    return conn


def test_a_first_version_database_opens_under_the_current_schema(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    conn = _old_database(path, 1, "v1job", "alice", dyno_pb2.JobRecord(gpu_seconds=3.0, pids=[5]))
    conn.commit()
    conn.close()
    store = JobStore(path)
    (r,) = store.query(JobQuery())
    assert (r.job_id, r.gpu_seconds, r.pids, r.traces) == ("v1job", 3.0, (5,), 0)
    version = sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0]
    assert version == SCHEMA_VERSION > 1
    indexes = {row[0] for row in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "jobs_last_seen" in indexes


def test_a_version_3_database_gains_the_analyses_table_and_keeps_its_records(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    conn = _old_database(path, 3, "v3job", "bob", dyno_pb2.JobRecord(gpu_seconds=2.0))
    conn.commit()
    conn.close()
    store = JobStore(path)
    (r,) = store.query(JobQuery())
    assert (r.job_id, r.user, r.gpu_seconds) == ("v3job", "bob", 2.0)
    assert store.read(lambda c: c.execute("SELECT COUNT(*) FROM analyses").fetchone()[0]) == 0
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    indexes = {row[0] for row in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {"analyses_trace", "analyses_job_newest", "analyses_finished"} <= indexes
    store.close()


def test_a_version_4_databases_analyses_still_answer_by_the_trace_times_their_summaries_hold(tmp_path: Path) -> None:
    """Rows written before trace_finished_ms was a column take the time their summary holds (0 where it has none,
    ordered among themselves by the one saved last); an analysis saved since is placed among them by its trace's
    time."""
    path = tmp_path / "jobs.sqlite3"
    conn = _old_database(path, 4, "j", "alice", dyno_pb2.JobRecord())
    for tid, traced in (("t-a", 200), ("t-b", 100), ("t-x", 0), ("t-y", 0)):  # t-b: an older trace analysed later
        s = TraceSummary(
            tid,
            job_id="j",
            user="alice",
            hostname="h",
            state=AnalysisState.DONE,
            analyzed_ms=10,
            trace_finished_ms=traced,
        )
        conn.execute(
            "INSERT INTO analyses (trace_id, job_id, user, hostname, state, finished_ms, summary, listed, rank_parts, "
            "thinned, bytes) VALUES (?, 'j', 'alice', 'h', 'DONE', 10, ?, ?, x'', 0, 1)",
            (tid, json.dumps(s.to_json()), listed_form(s)),
        )
    conn.commit()
    conn.close()
    store = JobStore(path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    indexes = {row[0] for row in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "analyses_job_newest" in indexes and "analyses_job" not in indexes
    analyses = AnalysisStore(lambda: store, retention_s=1e9, max_bytes=2**30)
    assert analyses.latest_summaries([("j", "alice")])[("j", "alice")].trace_id == "t-a"  # by its summary's time
    carried = dict(sqlite3.connect(path).execute("SELECT trace_id, trace_finished_ms FROM analyses").fetchall())
    assert carried == {"t-a": 200, "t-b": 100, "t-x": 0, "t-y": 0}

    def listed() -> str:
        (row,) = store.query_encoded(JobQuery())
        return dyno_pb2.TraceSummary.FromString(row[1][2]).trace_id

    assert listed() == "t-a"
    s = TraceSummary("t-c", job_id="j", user="alice", hostname="h", state=AnalysisState.DONE, trace_finished_ms=150)
    analyses.save(Outcome(s), listed_form(s), 20)
    assert analyses.latest_summaries([("j", "alice")])[("j", "alice")].trace_id == "t-a" == listed()  # older
    s = TraceSummary("t-d", job_id="j", user="alice", hostname="h", state=AnalysisState.DONE, trace_finished_ms=300)
    analyses.save(Outcome(s), listed_form(s), 20)
    assert analyses.latest_summaries([("j", "alice")])[("j", "alice")].trace_id == "t-d" == listed()
    store.close()


def test_a_version_5_databases_byte_total_starts_at_the_sum_of_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    conn = _old_database(path, 5, "j", "alice", dyno_pb2.JobRecord())
    for tid, size in (("t-a", 300), ("t-b", 200)):
        conn.execute(
            "INSERT INTO analyses (trace_id, job_id, user, hostname, state, finished_ms, summary, listed, rank_parts, "
            "thinned, bytes) VALUES (?, 'j', 'alice', 'h', 'DONE', 10, '{}', x'', x'', 0, ?)",
            (tid, size),
        )
    conn.commit()
    conn.close()
    store = JobStore(path)
    assert store.read(lambda c: c.execute("SELECT total FROM analyses_bytes").fetchall()) == [(500,)]
    store.write(lambda c: c.execute("DELETE FROM analyses WHERE trace_id = 't-b'"))  # the triggers keep it since
    assert store.read(lambda c: c.execute("SELECT total FROM analyses_bytes").fetchall()) == [(300,)]
    indexes = {row[0] for row in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "analyses_trace_time" in indexes
    store.close()


def test_a_migration_that_fails_midway_leaves_the_database_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step's DDL is in its transaction too: a CREATE before the failure does not stay behind, which would fail
    every later start ("already exists")."""
    path = tmp_path / "jobs.sqlite3"
    conn = _old_database(path, SCHEMA_VERSION - 1, "j", "alice", dyno_pb2.JobRecord(gpu_seconds=4.0))
    conn.commit()
    conn.close()
    monkeypatch.setattr(job_store, "MIGRATIONS", (*MIGRATIONS[:-1], (*MIGRATIONS[-1], "CREATE TABLE oops (")))
    with pytest.raises(StoreError):
        JobStore(path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION - 1
    monkeypatch.undo()
    store = JobStore(path)  # the next start runs the step whole
    (r,) = store.query(JobQuery())
    assert (r.job_id, r.gpu_seconds) == ("j", 4.0)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    store.close()


def test_a_newer_schema_is_refused_with_a_message(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer than this dynod"):
        JobStore(path)


def test_the_corrupt_hint_follows_sqlites_result_code_not_its_wording(tmp_path: Path) -> None:
    locked = sqlite3.OperationalError("database is locked (not a database problem)")
    locked.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
    assert "move it aside" not in str(_error(tmp_path / "jobs.sqlite3", "read it", locked))


def test_a_corrupt_or_truncated_file_is_a_store_error_naming_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    path.write_bytes(b"this is no database, just junk bytes" * 200)
    with pytest.raises(StoreError, match="corrupt: move it aside"):
        JobStore(path)
    good = JobStore(tmp_path / "other.sqlite3")
    good.save([rec(f"j{i}") for i in range(200)])
    good.close()
    data = (tmp_path / "other.sqlite3").read_bytes()
    truncated = tmp_path / "truncated.sqlite3"
    truncated.write_bytes(data[: len(data) // 3])
    with pytest.raises(StoreError):
        JobStore(truncated).query(JobQuery())


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_read_only_state_dir_is_a_store_error(tmp_path: Path) -> None:
    d = tmp_path / "state"
    d.mkdir()
    d.chmod(0o555)
    try:
        with pytest.raises(StoreError, match="cannot open"):
            JobStore.in_dir(d)
    finally:
        d.chmod(0o755)


def test_retention_by_age_then_size_never_removes_running_records(tmp_path: Path) -> None:
    store = JobStore.in_dir(tmp_path)
    store.save([rec("old", last=1000, running=False), rec("new", last=900_000, running=False)])
    store.save([rec("live", last=0)])
    assert store.enforce_retention(now_ms=1_000_000, max_age_s=500, max_bytes=1 << 30) == 1
    assert sorted(r.job_id for r in store.query(JobQuery())) == ["live", "new"]
    big = [JobRecord(f"e{i}", "u", "h", i, i, False, pids=tuple(range(64))) for i in range(3000)]
    store.save(big)
    removed = store.enforce_retention(now_ms=1_000_000, max_age_s=1e9, max_bytes=64 * 1024)
    assert removed > 0
    left = store.query(JobQuery(), 0, 100_000)
    assert "live" in {r.job_id for r in left}
    assert len(left) < 3002

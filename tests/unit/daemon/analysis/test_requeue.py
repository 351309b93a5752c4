"""Analyses a restart left undone, analysed after the next start: over records written by the journal's own writer
and a real job database, newest first, only finished traces without a stored analysis, one at a time while no live
trace waits, records not believed skipped; nothing when the database cannot be used or analysis is off."""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

import pytest
from analysis_fakes import ANALYSIS_WAIT_S, GOOD_WORKER, ME, NAMES, analyses, listed_trace, view
from small_daemon import OneValueSampler, daemon_config
from trace_records import write_trace_record

from dyno.daemon.analysis import analyses as analyses_module
from dyno.daemon.analysis.outcome import Outcome
from dyno.daemon.analysis.requeue import Requeued, requeue_unanalysed
from dyno.daemon.analysis.store import AnalysisStore
from dyno.daemon.analysis.work import AnalysisJob, job_of
from dyno.daemon.app import Daemon
from dyno.daemon.jobs.store import JobStore
from dyno.daemon.tracing import journal
from dyno.daemon.tracing.values import TraceState, TraceView
from dyno.trace_layout import agent_output
from dyno.trace_summary import AnalysisState, TraceSummary

from conftest import short_tmpdir, wait_for

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000


def _record(
    trace_dir: Path, trace_id: str, seconds_ago: int, *, state: TraceState = TraceState.DONE, file: bool = True
) -> Path:
    """A one-process trace of job-1 by this user recorded as dynod records it (its file written for a DONE process
    unless `file` is false), its record dated `seconds_ago` and its process's file then (trace_finished_ms)."""
    return write_trace_record(
        trace_dir,
        trace_id,
        state=state,
        file=file,
        created_ms=T0,
        updated_ms=T0 - seconds_ago * 1000,
        uid=ME,
        recorded_ms=T0 + 1000,
        mtime_s=time.time() - seconds_ago,
    )


def _store(db: JobStore | None) -> AnalysisStore:
    return AnalysisStore(lambda: db, retention_s=86400.0 * 365 * 100, max_bytes=2**30)


def _analysed(store: AnalysisStore, trace_id: str) -> None:
    s = TraceSummary(trace_id, job_id="job-1", user="alice", hostname="h", state=AnalysisState.DONE, analyzed_ms=T0)
    store.save(Outcome(s), b"", T0)


def _job_of(view: TraceView) -> AnalysisJob:
    return job_of(view, "node1", lambda uid: NAMES.get(uid, str(uid)))


def test_finished_traces_without_an_analysis_are_the_backlog_newest_first(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    for i, tid in enumerate(("t1", "t2", "t3", "t4", "t5", "t6")):
        _record(traces, tid, seconds_ago=100 - 10 * i)  # t6 the newest
    _record(traces, "running", seconds_ago=1, state=TraceState.RUNNING)  # a partial record: not finished
    db = JobStore.in_dir(tmp_path)
    store = _store(db)
    _analysed(store, "t5")

    got = requeue_unanalysed(traces, store.analysed, _job_of, per_job=20)

    assert got.records == 7
    assert [j.trace_id for j in got.backlog] == ["t6", "t4", "t3", "t2", "t1"]
    job = got.backlog[0]
    assert (job.job_id, job.user, job.hostname, job.files) == (
        "job-1",
        "alice",
        "node1",
        (str(agent_output(traces, "t6", "h", 7)),),
    )
    db.close()


def test_only_the_newest_records_are_read(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    for i in range(6):
        _record(traces, f"t{i}", seconds_ago=100 - i)
    db = JobStore.in_dir(tmp_path)
    got = requeue_unanalysed(traces, _store(db).analysed, _job_of, limit=4, per_job=20)
    assert got.records == 4
    assert [j.trace_id for j in got.backlog] == ["t5", "t4", "t3", "t2"]
    db.close()


def test_a_trace_whose_files_are_gone_is_in_the_backlog_for_its_trace_failed_result(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    _record(traces, "gone", seconds_ago=5, file=False)
    db = JobStore.in_dir(tmp_path)
    got = requeue_unanalysed(traces, _store(db).analysed, _job_of, per_job=20)
    assert got.records == 1
    (job,) = got.backlog
    assert job.files == () and "is gone since the trace finished" in job.no_file
    db.close()


def test_records_not_believed_are_neither_read_nor_queued(tmp_path: Path) -> None:
    """Which records are not believed, and their warnings: tests/unit/daemon/tracing/test_recorded.py."""
    traces = tmp_path / "traces"
    _record(traces, "good", seconds_ago=30)
    bad = _record(traces, "bad", seconds_ago=20)
    bad.write_bytes(bad.read_bytes().replace(b'"size_bytes": 5', b'"size_bytes": -5'))
    (traces / "no-record").mkdir()  # still running at the restart
    db = JobStore.in_dir(tmp_path)
    got = requeue_unanalysed(traces, _store(db).analysed, _job_of, per_job=20)
    assert got.records == 1 and [j.trace_id for j in got.backlog] == ["good"]
    db.close()


def test_a_database_that_cannot_tell_gives_every_finished_trace_unchecked(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    _record(traces, "t1", seconds_ago=5)
    _record(traces, "t2", seconds_ago=1)
    got = requeue_unanalysed(traces, _store(None).analysed, _job_of, per_job=20)
    assert [j.trace_id for j in got.backlog] == ["t2", "t1"]  # looked up at their turns (the backlog's)
    assert got.records == 2 and "the job database is not open" in got.unchecked
    absent = requeue_unanalysed(tmp_path / "absent", _store(None).analysed, _job_of, per_job=20)
    assert absent == Requeued(0, ())


def _old_analysed_new_not(tmp_path: Path) -> tuple[Path, JobStore]:
    """Traces "old" and "new" recorded, and a job database holding old's analysis."""
    traces = tmp_path / "traces"
    _record(traces, "old", seconds_ago=20)
    _record(traces, "new", seconds_ago=10)
    db = JobStore.in_dir(tmp_path)
    _analysed(_store(db), "old")
    return traces, db


def test_analyses_started_over_a_trace_dir_analyse_its_unanalysed_traces_without_being_asked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    traces, db = _old_analysed_new_not(tmp_path)
    a = analyses(tmp_path, db=db, trace_dir=traces)
    with caplog.at_level(logging.INFO):
        a.start()
        found = wait_for(lambda: a.lookup("new"), timeout_s=ANALYSIS_WAIT_S)
    a.stop()
    assert found.summary.state == AnalysisState.DONE and found.summary.job_id == "job-1"
    lines = [r.getMessage() for r in caplog.records if "without an analysis" in r.getMessage()]
    assert lines == [
        f"analysis: 1 finished trace(s) without an analysis, of 2 trace record(s) read in {traces}: analysed newest "
        "first, one at a time while no live trace waits"
    ]
    db.close()


def test_requeued_traces_are_not_queued_again_by_their_record_rewritten_and_the_newest_stays_latest(
    tmp_path: Path,
) -> None:
    """The requeue queues newest first, so the older trace is analysed last: the job's latest is still the newer
    one's; the live listener, told of a requeued trace again (its record rewritten), does not analyse it twice."""
    traces = tmp_path / "traces"
    _record(traces, "old", seconds_ago=20)
    _record(traces, "new", seconds_ago=10)
    db = JobStore.in_dir(tmp_path)
    a = analyses(tmp_path, db=db, trace_dir=traces)
    a.start()
    wait_for(lambda: a.lookup("old"), timeout_s=ANALYSIS_WAIT_S)
    assert a.lookup("new") is not None  # analysed before old
    key = ("job-1", "alice")
    assert a.latest([key])[key].trace_id == "new"
    assert listed_trace(a, key) == "new"
    again = journal.load_record(traces, "new", quiet=True)
    assert again is not None
    a.trace_finished(again)  # its record rewritten: the same files
    a.trace_finished(view("after", TraceState.DONE))  # FIFO: "new" again would run before it
    wait_for(lambda: a.lookup("after"), timeout_s=ANALYSIS_WAIT_S)
    a.stop()
    runs = db.read(lambda c: c.execute("SELECT trace_id, COUNT(*) FROM analyses GROUP BY trace_id").fetchall())
    assert dict(runs) == {"old": 1, "new": 1, "after": 1}
    db.close()


def test_analyses_without_a_database_log_once_and_analyse_nothing_until_it_can_tell(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    traces = tmp_path / "traces"
    _record(traces, "t1", seconds_ago=5)
    a = analyses(tmp_path, "raise SystemExit('no worker must start')", db=None, trace_dir=traces)
    with caplog.at_level(logging.WARNING):
        a.start()
        wait_for(lambda: "cannot be told yet" in caplog.text, timeout_s=ANALYSIS_WAIT_S)
        time.sleep(0.2)  # the backlog's first turn: it cannot tell either, and waits (BACKLOG_RETRY_S)
    assert a.state_of("t1") is None and a.lookup("t1") is None
    a.stop()
    assert caplog.text.count("cannot be told yet") == 1
    assert "wait:" not in caplog.text  # the same problem: one WARNING (throttled)


@pytest.mark.parametrize("enabled", [True, False])
def test_dynod_queues_them_at_start_only_with_analysis_enabled(enabled: bool, caplog: pytest.LogCaptureFixture) -> None:
    d = short_tmpdir("dyno-requeue-")
    _record(d / "traces", "t1", seconds_ago=5, file=False)  # TRACE_FAILED at once: no worker
    daemon = Daemon(daemon_config(d, analysis_enabled=enabled), samplers=[OneValueSampler()])  # type: ignore[list-item]
    try:
        with caplog.at_level(logging.INFO):
            daemon.start()
            if enabled:
                assert daemon.analyses is not None
                s = wait_for(lambda: daemon.analyses.lookup("t1"), timeout_s=ANALYSIS_WAIT_S).summary  # type: ignore[union-attr]
                assert s.state == AnalysisState.FAILED and "is gone" in s.failure_message
            else:
                time.sleep(0.3)
                assert daemon.analyses is None
        assert any("without an analysis, of" in r.getMessage() for r in caplog.records) == enabled
    finally:
        daemon.stop(grace_s=0)
        shutil.rmtree(d, ignore_errors=True)


def test_only_a_jobs_newest_per_job_traces_are_queued_so_a_restart_evicts_no_newer_analysis(tmp_path: Path) -> None:
    """The store keeps a job's per_job newest analyses: an older trace, however often dynod restarts, is not
    analysed again (its save would evict a newer one's, which the next restart would queue again)."""
    traces = tmp_path / "traces"
    for i in range(5):
        _record(traces, f"t{i}", seconds_ago=100 - 10 * i)  # t4 the newest
    db = JobStore.in_dir(tmp_path)
    store = AnalysisStore(lambda: db, retention_s=86400.0 * 365 * 100, max_bytes=2**30, per_job=3)

    def restart() -> list[str]:
        found = requeue_unanalysed(traces, store.analysed, _job_of, per_job=store.per_job).backlog
        for job in found:  # analysed, as the workers would, and saved (the store trims the job's oldest)
            store.save(Outcome(job.summary(AnalysisState.DONE)), b"", T0)
        return [j.trace_id for j in found]

    assert restart() == ["t4", "t3", "t2"]
    assert restart() == []
    assert store.analysed([f"t{i}" for i in range(5)]) == {"t4", "t3", "t2"}
    _record(traces, "t5", seconds_ago=1)
    assert restart() == ["t5"]  # its save trims t2, which is now older than the job's 3 newest
    assert restart() == []
    assert store.analysed([f"t{i}" for i in range(6)]) == {"t5", "t4", "t3"}
    db.close()


def _saved(db: JobStore) -> list[str]:
    """The traces whose analyses were saved, in the order they were."""
    return [r[0] for r in db.read(lambda c: c.execute("SELECT trace_id FROM analyses ORDER BY id").fetchall())]


def _held_while(flag: Path, trace_id: str) -> str:
    """A good worker that, for `trace_id`, first waits while `flag` exists."""
    hold = (
        "import os, sys, time\n"
        f"while sys.argv[sys.argv.index('--trace-id') + 1] == {trace_id!r} and os.path.exists({str(flag)!r}):\n"
        "    time.sleep(0.02)\n"
    )
    return hold + GOOD_WORKER


def test_traces_beyond_the_queues_places_are_all_analysed_newest_first_without_being_asked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    traces = tmp_path / "traces"
    for i in range(1, 5):
        _record(traces, f"t{i}", seconds_ago=100 - 10 * i)  # t4 the newest
    db = JobStore.in_dir(tmp_path)
    a = analyses(tmp_path, db=db, trace_dir=traces, max_queued=1)
    with caplog.at_level(logging.INFO):
        a.start()
        wait_for(lambda: len(_saved(db)) == 4, timeout_s=4 * ANALYSIS_WAIT_S)
        said = wait_for(lambda: [r.getMessage() for r in caplog.records if "backlog is done" in r.getMessage()])
    a.stop()
    assert _saved(db) == ["t4", "t3", "t2", "t1"]
    start = [r.getMessage() for r in caplog.records if "without an analysis, of" in r.getMessage()]
    assert start == [
        f"analysis: 4 finished trace(s) without an analysis, of 4 trace record(s) read in {traces}: analysed newest "
        "first, one at a time while no live trace waits"
    ]
    assert said == ["analysis: the backlog is done: the 4 trace(s) found at start are analysed"]
    db.close()


def _held_traces(tmp_path: Path, n: int) -> tuple[Path, Path, JobStore]:
    """Traces t1..tn (the newest last) recorded, a hold flag set (for _held_while), and a job database."""
    traces = tmp_path / "traces"
    for i in range(1, n + 1):
        _record(traces, f"t{i}", seconds_ago=100 - 10 * i)
    flag = tmp_path / "hold"
    flag.touch()
    return traces, flag, JobStore.in_dir(tmp_path)


def test_live_traces_go_before_the_backlog_and_a_backlog_trace_analysed_meanwhile_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    traces, flag, db = _held_traces(tmp_path, 4)
    a = analyses(tmp_path, _held_while(flag, "t2"), db=db, trace_dir=traces, max_queued=2)
    with caplog.at_level(logging.INFO):
        a.start()  # the backlog t4, t3, t2, t1: one queued at a time
        wait_for(lambda: a.state_of("t2") == AnalysisState.RUNNING, timeout_s=3 * ANALYSIS_WAIT_S)
        a.trace_finished(view("live", TraceState.DONE))  # the listener
        record = journal.load_record(traces, "t1", quiet=True)
        assert record is not None
        a.analyse_again(_job_of(record))  # GetTraceSummary of a backlog trace
        flag.unlink()
        # said only at the idle turn after t1 left the backlog: after its second analysis, were it not skipped
        wait_for(lambda: "the 4 trace(s) found at start" in caplog.text, timeout_s=3 * ANALYSIS_WAIT_S)
    a.stop()
    assert _saved(db) == ["t4", "t3", "t2", "live", "t1"]
    db.close()


def test_a_database_that_cannot_tell_keeps_the_backlog_and_it_is_tried_again_later(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces, flag, db = _held_traces(tmp_path, 3)
    open_db: list[JobStore | None] = [db]
    a = analyses(tmp_path, _held_while(flag, "t3"), db=db, trace_dir=traces, max_queued=1)
    a.store = AnalysisStore(lambda: open_db[0], retention_s=86400.0, max_bytes=2**30)
    monkeypatch.setattr(analyses_module, "BACKLOG_RETRY_S", 0.5)
    a.start()  # the backlog t3, t2, t1: t3 offered first
    wait_for(lambda: a.state_of("t3") == AnalysisState.RUNNING, timeout_s=ANALYSIS_WAIT_S)
    open_db[0] = None  # t3's analysis is kept in memory; the backlog's turn cannot tell what is analysed
    flag.unlink()
    wait_for(lambda: "left unanalysed before this start wait" in caplog.text, timeout_s=ANALYSIS_WAIT_S)
    assert a.state_of("t2") is None and a.lookup("t2") is None
    open_db[0] = db  # no live trace comes: the retry finds the database again
    wait_for(lambda: len(_saved(db)) == 2, timeout_s=3 * ANALYSIS_WAIT_S)
    a.stop()
    assert _saved(db) == ["t2", "t1"]
    assert caplog.text.count("left unanalysed before this start wait") == 1
    db.close()


def test_a_database_back_after_start_analyses_only_the_unanalysed_of_the_unchecked_backlog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    traces, db = _old_analysed_new_not(tmp_path)
    open_db: list[JobStore | None] = [None]  # not usable at start: the backlog is "new", "old", unchecked
    a = analyses(tmp_path, db=db, trace_dir=traces)
    a.store = AnalysisStore(lambda: open_db[0], retention_s=86400.0 * 365 * 100, max_bytes=2**30)
    monkeypatch.setattr(analyses_module, "BACKLOG_RETRY_S", 0.3)
    with caplog.at_level(logging.INFO):
        a.start()
        wait_for(lambda: "cannot be told yet" in caplog.text, timeout_s=ANALYSIS_WAIT_S)
        open_db[0] = db
        # said at the turn after "old" left the backlog: after its second analysis, were it not looked up
        wait_for(lambda: "the 2 trace(s) found at start" in caplog.text, timeout_s=3 * ANALYSIS_WAIT_S)
    a.stop()
    assert _saved(db) == ["old", "new"]
    db.close()

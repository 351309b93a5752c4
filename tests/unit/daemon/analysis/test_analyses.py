"""Analyses as dynod runs it: a finished trace is analysed once by the worker and its summary stored; a trace that
wrote no file is TRACE_FAILED without a worker; a database that cannot be used keeps summaries in memory."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from analysis_fakes import ANALYSIS_WAIT_S, analyses, listed_trace, view

from dyno.daemon.analysis.work import job_of
from dyno.daemon.jobs.store import JobStore
from dyno.daemon.tracing.values import TraceState
from dyno.trace_summary import AnalysisFailure, AnalysisState

from conftest import wait_for

pytestmark = pytest.mark.unit


def test_a_finished_trace_is_analysed_once_and_its_summary_kept_with_the_daemons_fields(tmp_path: Path) -> None:
    db = JobStore.in_dir(tmp_path)
    a = analyses(tmp_path, db=db)
    a.start()
    v = view("t1", TraceState.DONE, TraceState.FAILED)
    a.trace_finished(v)
    a.trace_finished(v)  # the record rewritten with the same files: not queued again
    found = wait_for(lambda: a.lookup("t1"), timeout_s=ANALYSIS_WAIT_S)
    s = found.summary
    assert (s.state, s.job_id, s.user, s.hostname, s.trace_finished_ms) == (
        AnalysisState.DONE,
        "job-1",
        "alice",
        "node1",
        5001,
    )
    assert [r.rule for r in s.rules] == ["dataloader"] and found.rank_parts.startswith(b"\x1f\x8b")
    assert db.read(lambda c: c.execute("SELECT COUNT(*) FROM analyses").fetchone()[0]) == 1
    assert set(a.latest_listed({("job-1", "alice"), ("job-2", "alice")})) == {("job-1", "alice")}
    assert a.latest([("job-1", "alice")])[("job-1", "alice")].trace_id == "t1"
    a.stop()
    db.close()


def test_a_trace_that_wrote_no_file_is_trace_failed_without_a_worker(tmp_path: Path) -> None:
    a = analyses(tmp_path, "raise SystemExit('a worker must not start')", db=JobStore.in_dir(tmp_path))
    a.start()
    a.trace_finished(view("t2", TraceState.FAILED, TraceState.CANCELLED))
    s = wait_for(lambda: a.lookup("t2"), timeout_s=ANALYSIS_WAIT_S).summary
    assert (s.state, s.failure) == (AnalysisState.FAILED, AnalysisFailure.TRACE_FAILED)
    assert "pid 100 failed (it failed); pid 101 cancelled" in s.failure_message
    assert s.trace_finished_ms == 5001  # its processes' last update: a job's latest is ordered by it
    a.stop()


def test_without_a_database_summaries_stay_in_memory_without_their_parts(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    a = analyses(tmp_path, db=None)
    a.start()
    a.trace_finished(view("t3", TraceState.DONE))
    found = wait_for(lambda: a.lookup("t3"), timeout_s=ANALYSIS_WAIT_S)
    assert found.summary.state == AnalysisState.DONE and found.rank_parts == b""
    assert "analyses kept in memory only" in caplog.text
    assert set(a.latest_listed({("job-1", "alice")})) == {("job-1", "alice")}
    a.stop()


def test_a_crashing_worker_is_a_crashed_result_and_the_next_trace_is_analysed(tmp_path: Path) -> None:
    code = "import os, sys; sys.argv.index('t4') and os.abort()"
    a = analyses(tmp_path, code + "\n" + "", db=JobStore.in_dir(tmp_path))
    a.start()
    a.trace_finished(view("t4", TraceState.DONE))
    s = wait_for(lambda: a.lookup("t4"), timeout_s=ANALYSIS_WAIT_S).summary
    assert (s.state, s.failure) == (AnalysisState.FAILED, AnalysisFailure.CRASHED) and "SIGABRT" in s.failure_message
    assert s.trace_finished_ms == 5000
    a.stop()


def test_analyse_again_queues_a_finished_trace_and_says_pending(tmp_path: Path) -> None:
    a = analyses(tmp_path, db=JobStore.in_dir(tmp_path))
    s = a.analyse_again(job_of(view("t5", TraceState.DONE), "h", lambda uid: "u"))  # not started: stays queued
    assert s.state == AnalysisState.PENDING and a.state_of("t5") == AnalysisState.PENDING
    a.stop()


def test_analysing_an_old_trace_after_a_newer_one_leaves_the_newer_the_jobs_latest(tmp_path: Path) -> None:
    """ListJobs' latest_analysis and the Prometheus series (latest: cached per key) both stay the newer trace's."""
    db = JobStore.in_dir(tmp_path)
    a = analyses(tmp_path, db=db)
    a.start()
    key = ("job-1", "alice")
    a.trace_finished(view("t-new", TraceState.DONE, at=8000))
    wait_for(lambda: a.lookup("t-new"), timeout_s=ANALYSIS_WAIT_S)
    assert a.latest([key])[key].trace_id == "t-new"  # cached for the next scrapes
    a.analyse_again(job_of(view("t-old", TraceState.DONE, at=6000), "node1", lambda uid: "alice"))  # GetTraceSummary
    wait_for(lambda: a.lookup("t-old"), timeout_s=ANALYSIS_WAIT_S)
    assert a.latest([key])[key].trace_id == "t-new"
    assert listed_trace(a, key) == "t-new"
    a.stop()
    again = analyses(tmp_path, db=db)  # a new dynod: nothing cached; an old trace analysed before any scrape
    again.start()
    again.analyse_again(job_of(view("t-older", TraceState.DONE, at=5000), "node1", lambda uid: "alice"))
    wait_for(lambda: again.lookup("t-older"), timeout_s=ANALYSIS_WAIT_S)
    assert again.latest([key])[key].trace_id == "t-new"
    again.stop()
    db.close()


def test_without_a_database_an_old_traces_summary_does_not_replace_the_newer_in_memory(tmp_path: Path) -> None:
    a = analyses(tmp_path, db=None)
    a.start()
    key = ("job-1", "alice")
    a.trace_finished(view("t-new", TraceState.DONE, at=8000))
    wait_for(lambda: a.lookup("t-new"), timeout_s=ANALYSIS_WAIT_S)
    a.trace_finished(view("t-old", TraceState.DONE, at=6000))
    wait_for(lambda: a.lookup("t-old"), timeout_s=ANALYSIS_WAIT_S)
    assert a.latest([key])[key].trace_id == "t-new"
    assert listed_trace(a, key) == "t-new"
    a.stop()


def test_stop_kills_a_running_worker_and_records_nothing(tmp_path: Path) -> None:
    code = "import os, sys, time; open(sys.argv[sys.argv.index('--out') + 1] + '/summary.json', 'w')" + (
        ".write(str(os.getpid())); time.sleep(60)"
    )
    a = analyses(tmp_path, code, db=JobStore.in_dir(tmp_path))
    a.start()
    a.trace_finished(view("t6", TraceState.DONE))
    deadline = time.monotonic() + 20
    while a.state_of("t6") != AnalysisState.RUNNING and time.monotonic() < deadline:
        time.sleep(0.02)
    out = next(tmp_path.glob("dynod-analysis-*"))
    while not (out / "summary.json").read_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    pid = int((out / "summary.json").read_text())
    t0 = time.monotonic()
    a.stop()
    assert time.monotonic() - t0 < 5 and not Path(f"/proc/{pid}").exists()
    assert a.lookup("t6") is None and not out.exists()  # not a failure of the trace: nothing recorded

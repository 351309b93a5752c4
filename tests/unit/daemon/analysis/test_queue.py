"""The analysis queue: one job at a time, oldest first, bounded (the oldest dropped), states while queued/running."""

from __future__ import annotations

import threading

import pytest

from dyno.daemon.analysis.queue import AnalysisQueue, Offered
from dyno.daemon.analysis.work import AnalysisJob
from dyno.trace_summary import AnalysisState

pytestmark = pytest.mark.unit


def _job(tid: str) -> AnalysisJob:
    return AnalysisJob(tid, ("f",), "j", "u", 1, "h", 0)


def test_jobs_run_one_at_a_time_oldest_first_and_a_full_queue_drops_the_oldest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate, started, ran = threading.Event(), threading.Event(), []
    concurrent = []
    running = [0]

    def run(job: AnalysisJob) -> None:
        running[0] += 1
        concurrent.append(running[0])
        started.set()
        gate.wait(10)
        ran.append(job.trace_id)
        running[0] -= 1

    q = AnalysisQueue(run, max_queued=2)
    q.start()
    q.submit(_job("a"))
    assert started.wait(10)
    assert q.state_of("a") == AnalysisState.RUNNING
    for tid in ("b", "c", "d"):
        q.submit(_job(tid))
    assert [q.state_of(t) for t in "bcd"] == [None, AnalysisState.PENDING, AnalysisState.PENDING]
    assert "trace b: not analysed: the analysis queue is full (analysis_queue 2)" in caplog.text
    gate.set()
    done = threading.Event()
    q.submit(_job("e"))  # drops c
    q._run = lambda job: (ran.append(job.trace_id), done.set() if job.trace_id == "e" else None)  # type: ignore[assignment]
    assert done.wait(10)
    q.stop()
    assert ran == ["a", "d", "e"] and max(concurrent) == 1 and q.state_of("e") is None


def test_a_raising_job_is_logged_and_the_next_runs(caplog: pytest.LogCaptureFixture) -> None:
    done = threading.Event()

    def run(job: AnalysisJob) -> None:
        if job.trace_id == "bad":
            raise RuntimeError("bug")
        done.set()

    q = AnalysisQueue(run, max_queued=4)
    q.start()
    q.submit(_job("bad"))
    q.submit(_job("good"))
    assert done.wait(10)
    q.stop()
    assert "trace bad: the analysis failed in dynod" in caplog.text
    q.submit(_job("late"))
    assert q.state_of("late") is None  # stopped: nothing is queued any more


def test_offer_takes_only_a_free_place_and_drops_nothing() -> None:
    q = AnalysisQueue(lambda job: None, max_queued=2)  # not started: what is queued stays queued
    q.submit(_job("live"))
    assert q.offer(_job("a")) == Offered.QUEUED
    assert q.offer(_job("b")) == Offered.FULL  # b refused, neither live nor a dropped
    assert q.offer(_job("live")) == Offered.ALREADY  # queued already: left where it is
    assert [q.state_of(t) for t in ("live", "a", "b")] == [AnalysisState.PENDING, AnalysisState.PENDING, None]
    q.stop()
    assert q.offer(_job("c")) == Offered.STOPPING and q.state_of("c") is None


def test_the_start_up_work_runs_on_the_queues_thread_before_any_job(caplog: pytest.LogCaptureFixture) -> None:
    order: list[str] = []
    done = threading.Event()

    def first() -> None:
        order.append(f"first on {threading.current_thread().name}")
        raise RuntimeError("bug")  # logged; the jobs run anyway

    q = AnalysisQueue(lambda job: (order.append(job.trace_id), done.set()), max_queued=4)  # type: ignore[func-returns-value]
    q.submit(_job("a"))
    q.start(first=first)
    assert done.wait(10)
    q.stop()
    assert order == ["first on trace-analysis", "a"]
    assert "the analysis queue's start-up work failed" in caplog.text

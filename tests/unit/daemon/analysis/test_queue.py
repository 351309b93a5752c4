"""The analysis queue: one job at a time, oldest first, bounded (the oldest dropped), states while queued/running;
the idle hook runs only while it is empty, so what it offers waits for every live job."""

from __future__ import annotations

import threading
import time

import pytest

from dyno.daemon.analysis.queue import AnalysisQueue, Offered
from dyno.daemon.analysis.work import AnalysisJob
from dyno.trace_summary import AnalysisState

from conftest import wait_for

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


class Backlog:
    """An idle hook offering the next of `tids` (one a call), noting what had run at each call."""

    def __init__(self, q: AnalysisQueue, tids: list[str], ran: list[str]) -> None:
        self.q, self.tids, self.ran = q, tids, ran
        self.calls: list[tuple[str, ...]] = []
        self.empty = threading.Event()

    def __call__(self) -> None:
        self.calls.append(tuple(self.ran))
        if not self.tids:
            self.empty.set()
            return
        assert self.q.offer(_job(self.tids.pop(0))) == Offered.QUEUED


def test_the_idle_hook_runs_only_when_the_queue_is_empty_and_its_jobs_after_the_live_ones() -> None:
    ran: list[str] = []
    q = AnalysisQueue(lambda job: ran.append(job.trace_id), max_queued=4)  # type: ignore[func-returns-value]
    idle = Backlog(q, ["x", "y"], ran)
    q.submit(_job("a"))
    q.submit(_job("b"))
    q.start(first=lambda: ran.append("first"), idle=idle)
    assert idle.empty.wait(10)
    q.stop()
    assert ran == ["first", "a", "b", "x", "y"]
    assert idle.calls == [("first", "a", "b"), ("first", "a", "b", "x"), ("first", "a", "b", "x", "y")]


def test_a_live_job_submitted_while_an_idle_job_runs_runs_next() -> None:
    ran: list[str] = []
    running, gate = threading.Event(), threading.Event()

    def run(job: AnalysisJob) -> None:
        if job.trace_id == "x1":
            running.set()
            gate.wait(10)
        ran.append(job.trace_id)

    q = AnalysisQueue(run, max_queued=4)
    idle = Backlog(q, ["x1", "x2", "x3"], ran)
    q.start(idle=idle)  # empty from the start: the idle hook runs at once
    assert running.wait(10)
    q.submit(_job("live"))
    gate.set()
    assert idle.empty.wait(10)
    q.stop()
    assert ran == ["x1", "live", "x2", "x3"]


def test_a_raising_idle_hook_is_logged_and_the_queue_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    done = threading.Event()

    def idle() -> None:
        raise RuntimeError("bug")

    q = AnalysisQueue(lambda job: done.set(), max_queued=4)
    q.start(idle=idle)
    wait_for(lambda: "the analysis queue's idle work failed" in caplog.text, timeout_s=10)
    q.submit(_job("a"))
    assert done.wait(10)
    q.stop()
    assert "the analysis queue's idle work failed" in caplog.text


def test_stop_returns_promptly_however_much_the_idle_hook_has_left() -> None:
    count = [0]

    def idle() -> None:  # an endless backlog
        count[0] += 1
        q.offer(_job(f"x{count[0]}"))

    q = AnalysisQueue(lambda job: None, max_queued=4)
    q.start(idle=idle)
    wait_for(lambda: count[0] > 10, timeout_s=10)
    t0 = time.monotonic()
    q.stop()
    assert time.monotonic() - t0 < 2 and q._thread is not None and not q._thread.is_alive()  # no idle work after


def test_an_idle_hook_that_asks_for_a_retry_runs_again_then_without_any_job() -> None:
    ran: list[str] = []
    calls = [0]

    def idle() -> float | None:  # the first call cannot tell (a database error): it asks again in 0.05 s
        calls[0] += 1
        if calls[0] == 1:
            return 0.05
        if calls[0] == 2:
            q.offer(_job("x"))
        return None

    q = AnalysisQueue(lambda job: ran.append(job.trace_id), max_queued=4)  # type: ignore[func-returns-value]
    q.start(idle=idle)
    wait_for(lambda: ran == ["x"] and calls[0] == 3, timeout_s=10)  # after x ran, once more
    time.sleep(0.1)
    q.stop()
    assert calls[0] == 3  # then it waits for a job (None: no retry)


@pytest.mark.parametrize("delay", [0.0, -1.0])
def test_an_idle_hook_asking_to_run_again_at_once_is_logged_and_waits_for_a_job(
    delay: float, caplog: pytest.LogCaptureFixture
) -> None:
    calls = [0]

    def idle() -> float:
        calls[0] += 1
        return delay

    done = threading.Event()
    q = AnalysisQueue(lambda job: done.set(), max_queued=4)
    q.start(idle=idle)
    wait_for(lambda: calls[0] == 1, timeout_s=10)
    time.sleep(0.1)
    assert calls[0] == 1  # not spinning
    q.submit(_job("a"))
    assert done.wait(10)
    wait_for(lambda: calls[0] == 2, timeout_s=10)
    q.stop()
    assert "asked to run again in" in caplog.text

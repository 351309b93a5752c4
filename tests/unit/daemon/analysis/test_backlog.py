"""The start-up backlog over plain objects: one trace offered a call, newest first; a trace analysed or queued
meanwhile skipped; one the queue takes no place for, or the database cannot tell about, kept first; FINISHED once
when it runs out."""

from __future__ import annotations

from collections.abc import Collection

import pytest

from dyno.daemon.analysis.backlog import Backlog, BacklogStep
from dyno.daemon.analysis.queue import Offered
from dyno.daemon.analysis.work import AnalysisJob
from dyno.daemon.jobs.store import StoreError

pytestmark = pytest.mark.unit


def _job(tid: str) -> AnalysisJob:
    return AnalysisJob(tid, ("f",), "j", "u", 1, "h", 0)


class Fakes:
    """The store's `analysed` and the queue's `offer`: `done` analysed, `busy` queued or running already, `answer`
    what offer says of any other; `broken` makes `analysed` raise StoreError."""

    def __init__(self) -> None:
        self.done: set[str] = set()
        self.busy: set[str] = set()
        self.answer = Offered.QUEUED
        self.broken = False
        self.offered: list[str] = []

    def analysed(self, tids: Collection[str]) -> set[str]:
        if self.broken:
            raise StoreError("the job database is not open")
        return self.done & set(tids)

    def offer(self, job: AnalysisJob) -> Offered:
        if job.trace_id in self.busy:
            return Offered.ALREADY
        if self.answer == Offered.QUEUED:
            self.offered.append(job.trace_id)
        return self.answer


def test_one_trace_is_offered_a_call_in_order_and_finished_is_said_once() -> None:
    f = Fakes()
    b = Backlog([_job("t3"), _job("t2"), _job("t1")])
    assert (len(b), b.total) == (3, 3)
    assert [b.offer_next(f.analysed, f.offer) for _ in range(5)] == [
        BacklogStep.QUEUED,
        BacklogStep.QUEUED,
        BacklogStep.QUEUED,
        BacklogStep.FINISHED,
        BacklogStep.EMPTY,
    ]
    assert f.offered == ["t3", "t2", "t1"] and len(b) == 0


def test_traces_analysed_or_queued_meanwhile_are_skipped() -> None:
    f = Fakes()
    b = Backlog([_job("t4"), _job("t3"), _job("t2"), _job("t1")])
    f.done.add("t4")  # GetTraceSummary analysed it meanwhile
    f.busy.add("t3")  # queued live (its record rewritten, or GetTraceSummary) and not analysed yet
    assert b.offer_next(f.analysed, f.offer) == BacklogStep.QUEUED
    assert f.offered == ["t2"] and len(b) == 1


def test_a_full_or_stopping_queue_and_a_database_that_cannot_be_used_keep_the_trace_first() -> None:
    f = Fakes()
    b = Backlog([_job("t2"), _job("t1")])
    for answer in (Offered.FULL, Offered.STOPPING):
        f.answer = answer
        assert b.offer_next(f.analysed, f.offer) == BacklogStep.WAITING
    f.answer, f.broken = Offered.QUEUED, True
    with pytest.raises(StoreError):
        b.offer_next(f.analysed, f.offer)
    assert len(b) == 2 and f.offered == []
    f.broken = False
    assert b.offer_next(f.analysed, f.offer) == BacklogStep.QUEUED and f.offered == ["t2"]


def test_an_empty_backlog_never_says_finished() -> None:
    f = Fakes()
    assert Backlog([]).offer_next(f.analysed, f.offer) == BacklogStep.EMPTY

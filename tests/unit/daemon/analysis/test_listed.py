"""ListJobs' form of a summary: bounded, and a page of 1000 of the largest records each with the largest summary
fits a stock gRPC client's 4 MiB less 64 KiB."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from grpc_context import AbortingContext

from dyno.daemon.analysis.listed import MAX_LISTED_BYTES, MAX_LISTED_RULES, listed_form
from dyno.daemon.analysis.outcome import Outcome
from dyno.daemon.analysis.store import AnalysisStore
from dyno.daemon.jobs.accounting import AccountingConfig, JobAccounting
from dyno.daemon.jobs.records import MAX_LISTED, JobRecord
from dyno.daemon.jobs.service import MAX_PAGE_SIZE, ListJobsRpc
from dyno.trace_summary import AnalysisState, RankStepStats, RuleLoss, TraceSummary
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def _largest(tid: str = "t" * 64) -> TraceSummary:
    rules = tuple(
        RuleLoss(f"rule-{i}" * 20, "MEDIUM" * 50, i / 100, 1e300, 2**31 - 1, "t" * 1024, "f" * 1024) for i in range(64)
    )
    ranks = tuple(RankStepStats(2**31 - 1 - i, 2**31 - 1, *(1e300,) * 5, True, *(0.5,) * 4) for i in range(4096))
    return TraceSummary(
        tid,
        "j" * 1024,
        "u" * 1024,
        "h" * 1024,
        True,
        AnalysisState.FAILED,
        failure_message="m" * 1024,
        trace_finished_ms=2**62,
        analyzed_ms=2**62,
        analysis_cpu_s=1e300,
        rules=rules,
        ranks=ranks,
        analysed_window="w" * 1024,
    )


def test_the_listed_form_is_bounded_keeps_the_costliest_rules_and_the_slowest_ranks() -> None:
    data = listed_form(_largest())
    m = dyno_pb2.TraceSummary.FromString(data)
    assert len(data) <= MAX_LISTED_BYTES and not m.rank_parts
    shares = [r.time_lost_share for r in m.rules]  # the costliest, in order; the extreme texts leave out a few
    assert 12 <= len(shares) <= MAX_LISTED_RULES and shares == sorted(shares, reverse=True) and shares[0] == 0.63
    assert not m.rules[0].fix and not m.ranks
    usual = TraceSummary(
        "t",
        "job",
        "alice",
        "node1",
        rules=tuple(
            RuleLoss(f"rule-{i}", "HIGH", i / 100, 1.0, 8, "a title of some length " * 3, "fix") for i in range(20)
        ),
        ranks=tuple(RankStepStats(i, 50, *(1234.5,) * 5, True, *(0.5,) * 4) for i in range(8)),
    )
    m = dyno_pb2.TraceSummary.FromString(listed_form(usual))
    assert len(m.rules) == MAX_LISTED_RULES and len(m.ranks) == 8
    small = TraceSummary(
        "t",
        rules=(RuleLoss("a", "LOW", 0.1, fix="do"),),
        ranks=(RankStepStats(1, mean_step_us=5.0), RankStepStats(0, mean_step_us=9.0)),
    )
    m = dyno_pb2.TraceSummary.FromString(listed_form(small))
    assert [r.rank for r in m.ranks] == [0, 1] and m.rules[0].rule == "a" and m.rules[0].fix == ""
    many = TraceSummary("t", ranks=tuple(RankStepStats(i, mean_step_us=float(i)) for i in range(200)))
    ranks = [r.rank for r in dyno_pb2.TraceSummary.FromString(listed_form(many)).ranks]
    assert ranks == sorted(ranks) and min(ranks) >= 200 - len(ranks) and 0 < len(ranks) <= 64


def test_a_page_of_the_largest_records_with_the_largest_summaries_fits_a_stock_client(tmp_path: Path) -> None:
    acc = JobAccounting(AccountingConfig(state_dir=tmp_path, hostname="h"), list, list)
    acc.start()
    assert acc._store is not None
    big = tuple(range(4_000_000, 4_000_000 + MAX_LISTED))
    acc._store.save(
        JobRecord(
            "x" * 128,
            "u" * 32,
            "h" * 64,
            2**41,
            2**41 + i,
            False,
            pids=big,
            ranks=big,
            gpu_indices=big,
            gpu_seconds=1.5,
            energy_joules=2.5,
            cpu_seconds=3.5,
            gpu_memory_max_bytes=2**40,
            source="registered",
        )
        for i in range(MAX_PAGE_SIZE)
    )
    largest = replace(_largest(), job_id="x" * 128, user="u" * 32)  # every record's job
    AnalysisStore(acc.store, retention_s=1e9, max_bytes=2**40).save(Outcome(largest), listed_form(largest), 1)
    answer = ListJobsRpc(lambda: acc, "h" * 64)(dyno_pb2.ListJobsRequest(page_size=MAX_PAGE_SIZE), AbortingContext())  # type: ignore[arg-type]
    assert len(answer.jobs) == MAX_PAGE_SIZE
    assert all(j.latest_analysis.trace_id == "t" * 64 and j.latest_analysis.rules for j in answer.jobs)
    assert answer.ByteSize() < 4 * 1024 * 1024 - 64 * 1024
    acc.stop()


def test_stored_running_and_unstored_records_carry_their_jobs_latest_analysis(tmp_path: Path) -> None:
    acc = JobAccounting(AccountingConfig(state_dir=tmp_path, hostname="h"), list, list)
    acc.start()
    assert acc._store is not None
    now = int(time.time() * 1000)
    live = JobRecord("live", "alice", "h", now - 10, now, True)
    ids = acc._store.save(
        [JobRecord(job, "alice", "h", now - 10, now - 5, False) for job in ("ended", "other")] + [live]
    )
    acc.book.resume([replace(live, record_id=ids[live.key], gpu_seconds=5.0)])  # newer than its row
    store = AnalysisStore(acc.store, retention_s=1e9, max_bytes=2**40)
    for tid, job in (("t-old", "ended"), ("t-new", "ended"), ("t-run", "live")):
        s = TraceSummary(tid, job_id=job, user="alice", state=AnalysisState.DONE)
        store.save(Outcome(s), listed_form(s), now)
    rpc = ListJobsRpc(lambda: acc, "h")
    jobs = {j.job_id: j for j in rpc(dyno_pb2.ListJobsRequest(), AbortingContext()).jobs}  # type: ignore[arg-type]
    assert jobs["ended"].latest_analysis.trace_id == "t-new" and jobs["live"].latest_analysis.trace_id == "t-run"
    assert jobs["live"].gpu_seconds == 5.0 and not jobs["other"].HasField("latest_analysis")
    acc._store.close()
    acc._store = None  # the database cannot be used: running records, with what dynod keeps in memory
    acc.latest_analyses = lambda keys: {k: listed_form(TraceSummary("t-mem")) for k in keys}
    jobs = {j.job_id: j for j in rpc(dyno_pb2.ListJobsRequest(), AbortingContext()).jobs}  # type: ignore[arg-type]
    assert list(jobs) == ["live"] and jobs["live"].latest_analysis.trace_id == "t-mem"


def test_a_running_record_not_flushed_yet_carries_its_jobs_latest_analysis(tmp_path: Path) -> None:
    """A job started since the last flush has no row yet: its analysis is looked up by key (the analyses' table),
    not only through the rows' query."""
    acc = JobAccounting(AccountingConfig(state_dir=tmp_path, hostname="h"), list, list)
    acc.start()
    assert acc._store is not None
    now = int(time.time() * 1000)
    acc._store.save([JobRecord("ended", "alice", "h", now - 10, now - 5, False)])
    acc.book.resume([JobRecord("new", "bob", "h", now - 10, now, True)])  # record_id 0: never flushed
    store = AnalysisStore(acc.store, retention_s=1e9, max_bytes=2**40)
    s = TraceSummary("t-new", job_id="new", user="bob", state=AnalysisState.DONE)
    store.save(Outcome(s), listed_form(s), now)
    asked: list[set[tuple[str, str]]] = []

    def by_key(keys: set[tuple[str, str]]) -> dict[tuple[str, str], bytes]:
        asked.append(keys)
        return store.latest_listed(keys)

    acc.latest_analyses = by_key
    jobs = {j.job_id: j for j in ListJobsRpc(lambda: acc, "h")(dyno_pb2.ListJobsRequest(), AbortingContext()).jobs}  # type: ignore[arg-type]
    assert jobs["new"].latest_analysis.trace_id == "t-new" and not jobs["ended"].HasField("latest_analysis")
    assert asked == [{("new", "bob")}]  # the stored rows' keys were answered by their own query
    acc.stop()


def test_listjobs_carries_the_newest_traces_analysis_though_an_older_one_was_analysed_last(tmp_path: Path) -> None:
    acc = JobAccounting(AccountingConfig(state_dir=tmp_path, hostname="h"), list, list)
    acc.start()
    assert acc._store is not None
    now = int(time.time() * 1000)
    acc._store.save([JobRecord("ended", "alice", "h", now - 10, now - 5, False)])
    acc.book.resume([JobRecord("new", "alice", "h", now - 10, now, True)])  # no row yet: looked up by key
    store = AnalysisStore(acc.store, retention_s=1e9, max_bytes=2**40)
    acc.latest_analyses = store.latest_listed
    for tid, finished in (("t-newer", now - 6), ("t-older", now - 8)):  # the older trace analysed last
        for job in ("ended", "new"):
            s = TraceSummary(
                f"{tid}-{job}", job_id=job, user="alice", state=AnalysisState.DONE, trace_finished_ms=finished
            )
            store.save(Outcome(s), listed_form(s), now)
    jobs = {j.job_id: j for j in ListJobsRpc(lambda: acc, "h")(dyno_pb2.ListJobsRequest(), AbortingContext()).jobs}  # type: ignore[arg-type]
    assert jobs["ended"].latest_analysis.trace_id == "t-newer-ended"
    assert jobs["new"].latest_analysis.trace_id == "t-newer-new"
    acc.stop()

"""jobs_columns.from_pages (the numpy join of columnar pages) gives exactly jobs_table.from_records' rows: over
random records with every case the join treats (a job on several daemons and hostnames, several records of a job on
one daemon, partial GPM, running, simulated, analyses DONE / FAILED, their traces' and analyses' times equal, in
either order and at int64's ends), as columnar pages, as pages of records (an older dynod) and both mixed; and a
job's analysis is its newest trace's, not the one analysed last (decision 68)."""

from __future__ import annotations

import random

import pytest
from job_pages import on_daemons, pages_of, shuffled_pages

from dyno.client.column_pages import check_page
from dyno.client.jobs_columns import from_pages
from dyno.client.jobs_table import from_records, to_json
from dyno.job_columns import job_columns
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit

_MIN, _MAX = -(2**63), 2**63 - 1


def _analysis(rng: random.Random) -> dyno_pb2.TraceSummary | None:
    kind = rng.random()
    if kind < 0.5:
        return None
    # few values: equal times on one job's hosts, where the first record's wins; an older trace analysed later; the
    # ends of int64 (-x overflows at its least)
    analyzed = rng.choice([0, 1, 2, 3, 4, _MIN, _MAX])
    trace = rng.choice([0, 0, 1, 2, 3, _MIN, _MAX])
    if kind < 0.65:
        failure = rng.choice([0, 1, 2, 3, 4, 5, 6, 99])  # 99: a failure this client does not know
        return dyno_pb2.TraceSummary(
            state=dyno_pb2.ANALYSIS_STATE_FAILED,
            failure=failure,  # type: ignore[arg-type]
            analyzed_ms=analyzed,
            trace_finished_ms=trace,
        )
    rules = [
        dyno_pb2.RuleLoss(rule=rng.choice(["dataloader", "straggler", "sync", "idle"]), time_lost_share=share)
        for share in rng.choices([0.0, 0.1, 0.25, 0.25, 0.5, 1.7, -0.1], k=rng.randrange(4))
    ]
    return dyno_pb2.TraceSummary(
        state=dyno_pb2.ANALYSIS_STATE_DONE, analyzed_ms=analyzed, trace_finished_ms=trace, rules=rules
    )


def _records(seed: int, n: int) -> list[tuple[str, dyno_pb2.JobRecord]]:
    rng = random.Random(seed)
    made = []
    for _ in range(n):
        gpu_s = rng.choice([0.0, 3600.0, rng.uniform(0, 1e5)])
        r = dyno_pb2.JobRecord(
            job_id=f"job-{rng.randrange(30)}",
            user=rng.choice(["alice", "bob", ""]),
            hostname=rng.choice(["node1", "node2", "node3", ""]),
            first_seen_ms=rng.randrange(10**12, 2 * 10**12),
            last_seen_ms=rng.randrange(10**12, 2 * 10**12),
            running=rng.random() < 0.1,
            simulated=rng.random() < 0.05,
            gpus_max=rng.randrange(9),
            gpu_seconds=gpu_s,
            busy_gpu_seconds=gpu_s * rng.random(),
            sm_active_gpu_seconds=gpu_s * rng.random(),
            gpm_gpu_seconds=rng.choice([gpu_s, gpu_s * 0.9995, gpu_s * 0.5, 0.0]),
            traces=rng.randrange(3),
        )
        made.append((r, _analysis(rng)))
    return on_daemons(rng, made)


@pytest.mark.parametrize("seed", range(12))
def test_columns_records_and_a_mixed_fleet_join_to_the_same_rows(seed: int) -> None:
    records = _records(seed, 200)
    daemons = sorted({d for d, _ in records})
    expected = from_records(records)
    assert len(expected) > 20 and any(r.analysis for r in expected) and any(r.host_count > 1 for r in expected)
    for columnar in (set(daemons), set(), set(daemons[::2])):
        pages = pages_of(records, columnar)
        for _, page in pages:
            check_page(page)  # as dynod makes them: pages.job_pages lets them through
        got = from_pages(pages)
        assert got == expected  # every field, floats to the bit, and the ranking
        assert to_json(got) == to_json(expected)


def test_a_daemons_pages_need_not_come_together() -> None:
    records = _records(7, 200)
    pages = shuffled_pages(records, random.Random(7))
    assert len(pages) > 2 * len({d for d, _ in records})
    assert from_pages(pages) == from_records(records)


def test_no_pages_and_empty_pages_are_no_rows() -> None:
    assert from_pages([]) == []
    assert from_pages([("a", dyno_pb2.ListJobsResponse()), ("b", dyno_pb2.ListJobsResponse(columns={}))]) == []


def test_an_older_trace_analysed_later_does_not_hide_a_newer_one() -> None:
    """After a restart's requeue, host a analyses the job's older trace after host b analysed its newer one: the job's
    analysis is b's (the newest trace's), from columns and from records alike; at equal trace times the one analysed
    last, then the first record's."""

    def record(trace: int, analyzed: int, rule: str) -> dyno_pb2.JobRecord:
        done = dyno_pb2.TraceSummary(
            state=dyno_pb2.ANALYSIS_STATE_DONE,
            trace_finished_ms=trace,
            analyzed_ms=analyzed,
            rules=[dyno_pb2.RuleLoss(rule=rule, time_lost_share=0.5)],
        )
        return dyno_pb2.JobRecord(job_id="j", user="u", gpu_seconds=3600.0, latest_analysis=done)

    cases = [
        ([("a", record(1_000, 9_000, "older-trace")), ("b", record(2_000, 3_000, "newer-trace"))], "newer-trace 50%"),
        ([("a", record(2_000, 3_000, "earlier")), ("b", record(2_000, 9_000, "later"))], "later 50%"),
        ([("a", record(2_000, 3_000, "first")), ("b", record(2_000, 3_000, "second"))], "first 50%"),
        ([("a", record(_MIN, _MAX, "least")), ("b", record(_MIN + 1, _MIN, "next"))], "next 50%"),
    ]
    for records, analysis in cases:
        assert [r.analysis for r in from_records(records)] == [analysis]
        for columnar in ({"a", "b"}, {"a"}):
            assert [r.analysis for r in from_pages(pages_of(records, columnar))] == [analysis]


@pytest.mark.parametrize("seed", range(4))
def test_an_older_dynods_columns_without_trace_times_join_as_times_of_0(seed: int) -> None:
    """Columns from a dynod before analysis_trace_finished_ms (the column empty): the records' analyses ordered as if
    every trace time were 0 (by analyzed_ms, then the first record's), mixed with newer hosts' columns and records."""
    records = _records(50 + seed, 200)
    pages = pages_of(records, {d for d, _ in records})
    old = set(sorted({d for d, _ in records})[::2])
    for daemon, page in pages:
        if daemon in old:
            del page.columns.analysis_trace_finished_ms[:]
            check_page(page)
    zeroed = [(d, dyno_pb2.JobRecord.FromString(r.SerializeToString())) for d, r in records]
    for daemon, r in zeroed:
        if daemon in old and r.HasField("latest_analysis"):
            r.latest_analysis.trace_finished_ms = 0
    assert any(r.HasField("latest_analysis") and r.latest_analysis.trace_finished_ms for d, r in records if d in old)
    expected = from_records(zeroed)
    assert from_pages(pages) == expected
    assert expected != from_records(records)  # the trace times change some job's analysis here


def test_job_columns_carry_each_analysis_trace_time() -> None:
    analysed = dyno_pb2.JobRecord(job_id="j", latest_analysis=dyno_pb2.TraceSummary(trace_finished_ms=_MIN))
    c = job_columns([dyno_pb2.JobRecord(job_id="i"), analysed])
    assert list(c.analysed_rows) == [1] and list(c.analysis_trace_finished_ms) == [_MIN]

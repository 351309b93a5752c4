"""column_ranking.rank_pages (the ranking over columnar ListJobs pages) gives exactly ranking.rank's answer over the
same records: random record sets with every case rank treats (a job's records repeated on a host and spread over
daemons; analyses DONE / FAILED / PENDING / of an unknown state / none, with equal trace and analysis times, an
older trace analysed later, times at int64's ends; NaN, negative and > 1
shares; empty and over-long titles, fixes and failure messages; jobs without GPU time), and fleets whose arrays are
empty (records without any analysis, analyses without rules, only FAILED ones, no GPU time), as columnar pages, as
pages of records (an older dynod) and both mixed: equal Opportunities (floats to the bit) and identical JSON and
text."""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass

import pytest
from job_pages import on_daemons, pages_of, shuffled_pages
from opportunity_cases import job_hosts

from dyno.client.column_pages import check_page
from dyno.client.opportunities.column_ranking import rank_pages
from dyno.client.opportunities.jsondoc import to_json
from dyno.client.opportunities.ranking import rank
from dyno.client.opportunities.text import render
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit

_RULES = ["dataloader", "straggler", "sync-calls", "made-up-rule"]
_TEXTS = ["", "", "short words", "x" * 1100]  # empty ones keep the text before; long ones are cut to 1024
_MIN, _MAX = -(2**63), 2**63 - 1
_SHARES = [0.0, 0.05, 0.1, 0.25, 0.25, 0.5, 1.0, 1.7, -0.1, math.nan, math.inf, -0.0]


@dataclass(frozen=True)
class _Fleet:
    """What a random fleet's records may hold (the defaults: every case)."""

    analyses: bool = True  # False: no record has an analysis
    only_failed: bool = False  # every analysis FAILED
    most_rules: int = 4  # a DONE analysis has 0..most_rules rules
    gpu_time: bool = True  # False: no record has GPU time


_EVERY_CASE = _Fleet()
_EMPTY_FLEETS = {
    "no analyses": _Fleet(analyses=False),
    "analyses without rules": _Fleet(most_rules=0),
    "only failed analyses": _Fleet(only_failed=True),
    "no GPU time": _Fleet(gpu_time=False),
}


def _analysis(rng: random.Random, fleet: _Fleet = _EVERY_CASE) -> dyno_pb2.TraceSummary | None:
    kind = rng.random()
    if kind < 0.25 or not fleet.analyses:
        return None
    # few values: ties, where DONE wins and then the first record's; the newest trace analysed before an older one
    analyzed = rng.choice([0, 1, 2, 3, _MIN, _MAX])
    trace = rng.choice([0, 0, 1, 2, _MIN, _MAX])
    if kind < 0.4 or fleet.only_failed:
        return dyno_pb2.TraceSummary(
            state=dyno_pb2.ANALYSIS_STATE_FAILED,
            failure=rng.choice([0, 1, 2, 3, 6, 99]),  # type: ignore[arg-type]  # 99: unknown to this client
            failure_message=rng.choice(_TEXTS),
            analyzed_ms=analyzed,
            trace_finished_ms=trace,
        )
    if kind < 0.5:
        state = rng.choice([dyno_pb2.ANALYSIS_STATE_PENDING, dyno_pb2.ANALYSIS_STATE_RUNNING, 42])
        return dyno_pb2.TraceSummary(state=state, analyzed_ms=analyzed, trace_finished_ms=_MAX)  # type: ignore[arg-type]
    rules = [
        dyno_pb2.RuleLoss(
            rule=rng.choice(_RULES),
            time_lost_share=rng.choice(_SHARES),
            title=rng.choice(_TEXTS),
            fix=rng.choice(_TEXTS),
        )
        for _ in range(rng.randrange(fleet.most_rules + 1))
    ]
    return dyno_pb2.TraceSummary(
        state=dyno_pb2.ANALYSIS_STATE_DONE, analyzed_ms=analyzed, trace_finished_ms=trace, rules=rules
    )


def _records(
    seed: int, n: int, *, odd_hours: bool = False, fleet: _Fleet = _EVERY_CASE
) -> list[tuple[str, dyno_pb2.JobRecord]]:
    rng = random.Random(seed)
    hours = [0.0, 1.0, 8.0, 8.0, -1.0, math.nan] + ([math.inf] if odd_hours else [])
    if not fleet.gpu_time:
        hours = [0.0, -1.0, math.nan]
    made = []
    for _ in range(n):
        r = dyno_pb2.JobRecord(
            job_id=f"job-{rng.randrange(25)}",
            user=rng.choice(["alice", "bob", ""]),
            hostname=rng.choice(["node1", "node2", "node3", ""]),
            gpu_seconds=rng.choice([*hours, rng.uniform(0, 1e5) if fleet.gpu_time else 0.0]) * 3600.0,
        )
        made.append((r, _analysis(rng, fleet)))
    return on_daemons(rng, made)


def _both(records: list[tuple[str, dyno_pb2.JobRecord]], columnar: set[str], top: int = 3) -> tuple[str, str]:
    kw = {"since_s": 86400.0, "source": "daemons", "top": top, "failed_hosts": [("h:1", "Unavailable: x")]}
    expected = rank(job_hosts(records), **kw)  # type: ignore[arg-type]
    pages = pages_of(records, columnar, analysis_rules=True)
    for _, page in pages:
        check_page(page, analyses=True)  # as dynod makes them: pages.job_pages lets them through
    got = rank_pages(pages, **kw)  # type: ignore[arg-type]
    assert json.dumps(to_json(got)) == json.dumps(to_json(expected))
    assert render(got, 100) == render(expected, 100)
    return repr(got), repr(expected)  # repr: floats to the bit (NaN too), and a numpy scalar would show


def _columnar_fleets(records: list[tuple[str, dyno_pb2.JobRecord]]) -> list[set[str]]:
    """The columnar daemons of three fleets over `records`' daemons: all, none, and every other one (a fleet mixed
    with records-only daemons whenever there are several)."""
    daemons = sorted({d for d, _ in records})
    half = set(daemons[::2])
    assert len(daemons) < 2 or 0 < len(half) < len(daemons)  # the third fleet is mixed indeed
    return [set(daemons), set(), half]


@pytest.mark.parametrize("seed", range(10))
def test_columns_records_and_a_mixed_fleet_rank_alike(seed: int) -> None:
    records = _records(seed, 300)
    expected = rank(job_hosts(records), since_s=86400.0, source="daemons")
    assert expected.rules and expected.unanalysed and expected.failed_analysis_count  # the cases are there
    for columnar in _columnar_fleets(records):
        got, want = _both(records, columnar)
        assert got == want


@pytest.mark.parametrize("fleet", _EMPTY_FLEETS)
@pytest.mark.parametrize("hosts", ["one host", "several hosts"])
def test_fleets_with_empty_arrays_rank_alike(fleet: str, hosts: str) -> None:
    """Records but no analysis (a new fleet, a window with nothing analysed), analyses without rules, only failed
    ones, no GPU time: on one host or several, as columns, records, and columns mixed with records-only hosts."""
    for seed in range(3):
        records = _records(200 + seed, 60, fleet=_EMPTY_FLEETS[fleet])
        if hosts == "one host":
            records = [("host0:1778", r) for _, r in records]
        daemons = sorted({d for d, _ in records})
        assert len(daemons) == 1 if hosts == "one host" else len(daemons) > 2
        for columnar in _columnar_fleets(records):
            got, want = _both(records, columnar)
            assert got == want
    expected = rank(job_hosts(records), since_s=86400.0, source="daemons")
    rules, gpu_hours = bool(expected.rules), expected.total_gpu_hours > 0
    assert (rules, gpu_hours) == (False, fleet != "no GPU time")  # each fleet is what its name says
    if fleet == "only failed analyses":
        assert expected.failed_analysis_count > 0


@pytest.mark.parametrize("seed", range(3))
def test_endless_gpu_hours_rank_alike_too(seed: int) -> None:
    """An infinite GPU time times a share of 0 is a NaN gain, which rank keeps: the orders agree even then."""
    records = _records(100 + seed, 200, odd_hours=True)
    for columnar in _columnar_fleets(records):
        got, want = _both(records, columnar, top=50)
        assert got == want


def test_a_daemons_pages_need_not_come_together() -> None:
    records = _records(8, 300)
    pages = shuffled_pages(records, random.Random(8), analysis_rules=True)
    assert len(pages) > 2 * len({d for d, _ in records})
    assert {page.HasField("columns") for _, page in pages} == {True, False}  # columns and records mixed
    expected = rank(job_hosts(records), since_s=1.0, source="daemons", top=20)
    assert repr(rank_pages(pages, since_s=1.0, source="daemons", top=20)) == repr(expected)


def test_many_listed_jobs_and_no_records() -> None:
    records = _records(77, 400)
    for columnar in _columnar_fleets(records):
        got, want = _both(records, columnar, top=10_000)
        assert got == want
    empty = rank_pages([], since_s=1.0, source="daemons")
    assert empty == rank([], since_s=1.0, source="daemons")


def test_a_hosts_newest_trace_stands_for_its_runs_not_the_one_analysed_last() -> None:
    """Two runs of a job on one host: the older run's trace analysed after the newer's (a restart's requeue). The
    newer trace's analysis stands for the host, from columns and records alike; at equal trace times the one analysed
    last, DONE before FAILED at equal times too."""

    def record(trace: int, analyzed: int, rule: str, state: int = dyno_pb2.ANALYSIS_STATE_DONE) -> dyno_pb2.JobRecord:
        summary = dyno_pb2.TraceSummary(
            state=state,  # type: ignore[arg-type]
            trace_finished_ms=trace,
            analyzed_ms=analyzed,
            rules=[dyno_pb2.RuleLoss(rule=rule, time_lost_share=0.5)],
        )
        return dyno_pb2.JobRecord(job_id="j", user="u", gpu_seconds=3600.0, latest_analysis=summary)

    failed = dyno_pb2.ANALYSIS_STATE_FAILED
    cases = [
        ([record(1_000, 9_000, "older-trace"), record(2_000, 3_000, "newer-trace")], "newer-trace"),
        ([record(2_000, 3_000, "earlier"), record(2_000, 9_000, "later")], "later"),
        ([record(2_000, 9_000, "failed", failed), record(2_000, 9_000, "done")], "done"),
        ([record(_MIN + 1, _MIN, "next"), record(_MIN, _MAX, "least")], "next"),
    ]
    for runs, rule in cases:
        records = [("h:1778", r) for r in runs]
        expected = rank(job_hosts(records), since_s=1.0, source="daemons")
        assert [o.rule for o in expected.rules] == [rule]
        for columnar in ({"h:1778"}, set()):
            got = rank_pages(pages_of(records, columnar, analysis_rules=True), since_s=1.0, source="daemons")
            assert repr(got) == repr(expected)


@pytest.mark.parametrize("seed", [0, 2, 3])
def test_an_older_dynods_columns_without_trace_times_rank_as_times_of_0(seed: int) -> None:
    """Columns from a dynod before analysis_trace_finished_ms (the column empty), beside newer hosts' columns and
    records: ranked as its records would be with every trace time 0 (by analyzed_ms, DONE first, the first record's)."""
    records = _records(300 + seed, 300)  # (seeds where the times change the answer)
    daemons = sorted({d for d, _ in records})
    columnar = set(daemons[:4])
    old = columnar & set(daemons[::2])  # (the others' records carry the trace times)
    pages = pages_of(records, columnar, analysis_rules=True)
    for daemon, page in pages:
        if daemon in old and page.HasField("columns"):
            del page.columns.analysis_trace_finished_ms[:]
            check_page(page, analyses=True)
    zeroed = [(d, dyno_pb2.JobRecord.FromString(r.SerializeToString())) for d, r in records]
    for daemon, r in zeroed:
        if daemon in old and r.HasField("latest_analysis"):
            r.latest_analysis.trace_finished_ms = 0
    expected = rank(job_hosts(zeroed), since_s=1.0, source="daemons", top=50)
    assert repr(expected) != repr(rank(job_hosts(records), since_s=1.0, source="daemons", top=50))  # times matter
    assert repr(rank_pages(pages, since_s=1.0, source="daemons", top=50)) == repr(expected)

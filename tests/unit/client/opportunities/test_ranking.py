"""The ranking of `dyno-cli opportunities` over hand-built records (opportunity_cases.py): Σ GPU-hours x share per
rule, ranked; a job on two hosts adds up per host; never-analysed and failed analyses are unknown, not zero."""

from __future__ import annotations

import pytest
from opportunity_cases import H, analysis, case_records, job_hosts, record

from dyno.client.opportunities.model import JobHost
from dyno.client.opportunities.ranking import merged, rank
from dyno.trace_analysis.rule_texts import RULE_TEXTS
from dyno.trace_summary import AnalysisState, RuleLoss, TraceSummary

pytestmark = pytest.mark.unit


def _rank(records, **kw):  # type: ignore[no-untyped-def]
    return rank(job_hosts(records), since_s=7 * 86400, source="daemons", **kw)


def test_rules_ranked_by_recoverable_gpu_hours_over_jobs_and_hosts() -> None:
    o = _rank(case_records("a:1778", "b:1778"))
    assert [r.rule for r in o.rules] == ["dataloader", "sync-calls"]
    dl, sync = o.rules
    assert dl.recoverable_gpu_hours == pytest.approx(11.0)
    assert (dl.job_count, dl.user_count, dl.host_count) == (1, 1, 2)
    (wide,) = dl.jobs
    assert (wide.job_id, wide.user, wide.hosts) == ("wide", "alice", ("host-a", "host-b"))
    assert wide.gpu_hours == pytest.approx(40.0) and wide.share == pytest.approx(11 / 40)
    assert sync.recoverable_gpu_hours == pytest.approx(6.0)
    assert (sync.job_count, sync.user_count, sync.host_count) == (2, 2, 1)
    assert [(j.job_id, j.recoverable_gpu_hours) for j in sync.jobs] == [("narrow", 5.0), ("wide", pytest.approx(1.0))]
    assert dl.fix == "dataloader fix" and dl.title == "dataloader title"  # the analysis' own words


def test_never_analysed_and_failed_are_unknown_not_zero() -> None:
    o = _rank(case_records("a:1778", "b:1778"))
    assert o.total_gpu_hours == pytest.approx(72.0)
    assert o.analysed_gpu_hours == pytest.approx(60.0) and o.never_analysed_gpu_hours == pytest.approx(12.0)
    assert (o.job_count, o.analysed_job_count, o.user_count, o.host_count) == (4, 2, 4, 2)
    assert [(u.job_id, u.gpu_hours, u.hosts) for u in o.unanalysed] == [
        ("dark", pytest.approx(8.0), ("host-b",)),
        ("broken", pytest.approx(4.0), ("host-a",)),
    ]
    dark, broken = o.unanalysed
    assert dark.failures == () and broken.failures == (("host-a", "timed out: worker killed after 120 s"),)
    assert o.unanalysed_job_count == 2 and o.failed_analysis_count == 1
    # neither counts toward any rule
    assert all(j.job_id not in ("dark", "broken") for r in o.rules for j in r.jobs)


def test_a_job_analysed_on_one_host_only_splits_its_gpu_hours() -> None:
    records = [
        ("a", record("half", "erin", "host-a", 10, analysis(("straggler", 0.4)))),
        ("b", record("half", "erin", "host-b", 10)),
    ]
    o = _rank(records)
    (rule,) = o.rules
    assert rule.recoverable_gpu_hours == pytest.approx(4.0) and rule.jobs[0].gpu_hours == pytest.approx(10.0)
    assert [(u.job_id, u.gpu_hours, u.hosts) for u in o.unanalysed] == [("half", pytest.approx(10.0), ("host-b",))]
    assert (o.job_count, o.analysed_job_count, o.unanalysed_job_count) == (1, 1, 1)


def test_top_cuts_the_lists_not_the_sums() -> None:
    records = [(f"h{i}", record(f"j{i}", f"u{i % 3}", f"h{i}", 1 + i, analysis(("tiny-ops", 0.5)))) for i in range(8)]
    records += [(f"h{i}", record(f"dark{i}", "x", f"h{i}", 1)) for i in range(4)]
    o = _rank(records, top=3)
    (rule,) = o.rules
    assert [j.job_id for j in rule.jobs] == ["j7", "j6", "j5"]
    assert (rule.job_count, rule.user_count) == (8, 3)
    assert rule.recoverable_gpu_hours == pytest.approx(sum(0.5 * (1 + i) for i in range(8)))
    assert len(o.unanalysed) == 3 and o.unanalysed_job_count == 4 and o.never_analysed_gpu_hours == pytest.approx(4)


def test_the_catalogue_gives_the_fix_when_the_analysis_has_none() -> None:
    bare = TraceSummary("t", state=AnalysisState.DONE, rules=(RuleLoss("dataloader", "", 0.3),))
    o = rank([JobHost("a", "a", "j", "u", H, bare)], since_s=86400, source="x")
    assert o.rules[0].fix == RULE_TEXTS["dataloader"].fix and o.rules[0].title == RULE_TEXTS["dataloader"].title
    odd = TraceSummary("t", state=AnalysisState.DONE, rules=(RuleLoss("not-a-rule", "", 0.3),))
    assert rank([JobHost("a", "a", "j", "u", H, odd)], since_s=1, source="x").rules[0].fix == ""


def test_shares_from_a_daemon_are_held_to_0_1() -> None:
    weird = TraceSummary(
        "t",
        state=AnalysisState.DONE,
        rules=(RuleLoss("a", "", float("nan")), RuleLoss("b", "", 7.0), RuleLoss("c", "", -1.0)),
    )
    o = rank([JobHost("d", "h", "j", "u", 2 * H, weird)], since_s=1, source="x")
    assert [(r.rule, r.recoverable_gpu_hours) for r in o.rules] == [("b", 2.0)]


def test_records_of_one_job_on_one_host_join_under_the_newest_analysis() -> None:
    old = analysis(("dataloader", 0.5), analyzed_ms=1_000)
    new = analysis(("sync-calls", 0.1), analyzed_ms=5_000)
    records = [
        ("a", record("j", "u", "h", 1, old)),
        ("a", record("j", "u", "h", 3, new)),
        ("a", record("j", "u", "h", 1)),
    ]
    joined = merged(job_hosts(records))
    (one,) = joined
    assert one.gpu_seconds == pytest.approx(5 * H) and one.analysis is not None
    assert [r.rule for r in one.analysis.rules] == ["sync-calls"]
    # the newest finished one even when it failed: its GPU-hours are then unknown
    failed = analysis(failed="crashed", analyzed_ms=9_000)
    o = _rank([("a", record("j", "u", "h", 1, new)), ("a", record("j", "u", "h", 1, failed))])
    assert o.rules == () and o.never_analysed_gpu_hours == pytest.approx(2.0)


def test_jobs_without_gpu_time_are_left_out() -> None:
    o = _rank([("a", record("cpu", "u", "h", 0, analysis(("tiny-ops", 0.9))))])
    assert (o.job_count, o.rules, o.unanalysed) == (0, (), ())

"""The cross-rank view's parts over plain objects: a rule's findings on several ranks as one group (how many, the
share of the window lost: median, min, max, the first as the example), cross-rank and single-rank findings as they
are, the rules that could not run once per reason, ranks in words, the slowest and fastest ranks."""

from __future__ import annotations

import pytest

from dyno.trace_analysis.report.model import RankSummary, Report, StepStats
from dyno.trace_analysis.report.rank_groups import (
    RANK_THRESHOLD,
    FindingGroup,
    collapsed,
    group_findings,
    group_outcomes,
    rank_ranges,
    ranks_by_step,
)
from dyno.trace_analysis.rules.base import Evidence, Finding, Severity
from dyno.trace_analysis.rules.engine import RuleOutcome

pytestmark = pytest.mark.unit


def rank(r: int, mean_us: float | None = 100.0, window_us: float = 1000.0) -> RankSummary:
    steps = None if mean_us is None else StepStats("profiler_step", 2, mean_us, mean_us, mean_us, mean_us, ())
    return RankSummary(r, f"rank-{r}.json", False, 10, window_us, "trace span", window_us, steps, None)


def finding(rule: str, r: int | None, *, share: float | None = None, lost_us: float = 0.0) -> Finding:
    ev = Evidence(time_lost_us=lost_us, share=share)
    return Finding(rule, Severity.MEDIUM, f"{rule} on {r}", ev, f"fix {rule}", rank=r)


def report(n: int, findings: list[Finding], outcomes: tuple[RuleOutcome, ...] = ()) -> Report:
    return Report(
        tuple(f"rank-{r}.json" for r in range(n)), tuple(rank(r) for r in range(n)), tuple(findings), outcomes, {}
    )


def test_a_rule_on_several_ranks_is_one_group_at_its_first_findings_place() -> None:
    found = [
        finding("straggler", None, share=0.3),
        finding("optimizer", 3, share=0.4),
        finding("dataloader", 7, share=0.2),
        finding("optimizer", 1, share=0.1),
        finding("optimizer", 2, lost_us=200.0),  # no share: its time lost over its rank's 1 ms window
        finding("optimizer", 2, share=0.05),  # a second finding on rank 2 counts the rank once
    ]
    items = group_findings(report(20, found))
    assert [getattr(i, "rule_id", None) for i in items] == ["straggler", "optimizer", "dataloader"]
    straggler, group, single = items
    assert straggler is found[0] and single is found[2]
    assert isinstance(group, FindingGroup)
    assert group.example is found[1] and group.ranks == (1, 2, 3) and group.of_ranks == 20
    assert group.shares == pytest.approx((0.05, 0.1, 0.2, 0.4))
    assert group.headline() == ("optimizer: 3 of 20 ranks, lost median 15.0% (5.0%..40.0%) of the window, e.g. rank 3")


def test_a_group_without_shares_says_no_loss_figure() -> None:
    (group,) = group_findings(report(20, [finding("x", 0), finding("x", 1)]))
    assert isinstance(group, FindingGroup)
    assert group.headline() == "x: 2 of 20 ranks, e.g. rank 0"


def test_the_rules_that_could_not_run_once_per_rule_and_reason() -> None:
    skipped = [RuleOutcome("a", r, "skipped", "no shapes") for r in (0, 1, 2, 5)]
    skipped.append(RuleOutcome("a", 3, "error", "boom"))
    skipped.append(RuleOutcome("b", None, "skipped", "one rank"))
    groups = group_outcomes(skipped)
    assert [(g.outcome.rule_id, g.outcome.reason, g.ranks) for g in groups] == [
        ("a", "no shapes", (0, 1, 2, 5)),
        ("a", "boom", (3,)),
        ("b", "one rank", ()),
    ]


def test_ranks_in_words() -> None:
    assert rank_ranges([5, 0, 1, 2, 3, 7, 8, 9, 2]) == "0-3, 5, 7-9"
    assert rank_ranges([]) == ""
    assert rank_ranges(range(0, 40, 2), limit=3) == "0, 2, 4 and 17 more ranks"


def test_the_slowest_and_fastest_ranks_by_mean_step() -> None:
    ranks = [rank(r, 100.0 + r) for r in range(30)] + [rank(30, None)]
    slowest, fastest = ranks_by_step(ranks, 3)
    assert [r.rank for r in slowest] == [29, 28, 27]
    assert [r.rank for r in fastest] == [2, 1, 0]
    slowest, fastest = ranks_by_step(ranks[:4], 3)  # fewer than twice: none listed twice
    assert [r.rank for r in slowest] == [3, 2, 1] and [r.rank for r in fastest] == [0]
    slowest, fastest = ranks_by_step([rank(r, None) for r in range(9)], 3)  # no steps: the first ranks
    assert [r.rank for r in slowest] == [0, 1, 2] and fastest == []


def test_the_threshold() -> None:
    assert not collapsed(report(RANK_THRESHOLD, []))
    assert collapsed(report(RANK_THRESHOLD + 1, []))
    assert not collapsed(report(RANK_THRESHOLD + 1, []), all_ranks=True)

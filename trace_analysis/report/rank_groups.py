"""The many-rank view the text and HTML reports share: past ``RANK_THRESHOLD`` ranks, the per-rank sections give
way to one cross-rank view (a 1,024-rank job printed a section, a finding and two tables per rank: 8.4 MiB).

- ``ranks_by_step``: the slowest and the fastest few ranks by mean step time (the straggler is first);
- ``group_findings``: the per-rank findings of one rule on two ranks or more as one ``FindingGroup`` (how many ranks,
  the share of their window lost: median, min and max, and the worst one as the example); cross-rank findings and
  a rule's finding on a single rank stay as they are, in the report's order (by severity, then time lost);
- ``group_outcomes``: the rules that could not run on some ranks, once per rule, status and reason;
- ``rank_ranges``: a set of ranks in words ("0-516, 518-1023").

Plain functions over the ``Report``: the JSON keeps every rank (tools read it); only what is printed is grouped.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

import msgspec

from ..rules.base import Finding
from ..rules.engine import RuleOutcome
from .model import RANK_THRESHOLD, RankSummary, Report

__all__ = [
    "FEW_RANKS",
    "RANK_THRESHOLD",
    "FindingGroup",
    "OutcomeGroup",
    "collapsed",
    "finding_share",
    "group_findings",
    "group_outcomes",
    "outcome_groups",
    "rank_ranges",
    "ranks_by_step",
]

FEW_RANKS = 5  # the slowest and the fastest ranks listed by name in the cross-rank view
MAX_RANGES = 12  # rank_ranges: ranges named before "and N more ranks"


def collapsed(report: Report, all_ranks: bool = False) -> bool:
    """Whether ``report`` is shown in the cross-rank view (more than ``RANK_THRESHOLD`` ranks, not ``all_ranks``)."""
    return not all_ranks and len(report.ranks) > RANK_THRESHOLD


def finding_share(f: Finding, windows: dict[int, float]) -> float | None:
    """The share of its rank's window ``f`` lost: its ``Evidence.share``, else its time lost over the window; None
    when neither is known (no share, and a time lost that cannot be measured)."""
    e = f.evidence
    if e.share is not None:
        return e.share
    if not e.measurable:
        return None
    window = windows.get(f.rank, 0.0) if f.rank is not None else 0.0
    return e.time_lost_us / window if window > 0 else None


class FindingGroup(msgspec.Struct, frozen=True):
    """One rule's findings on ``len(ranks)`` ranks (two or more) of ``of_ranks``. ``example``: the first of them in
    the report's order (the most severe, then most costly); ``shares``: each one's share of its rank's window lost
    (those that have one), ascending."""

    example: Finding
    ranks: tuple[int, ...]
    of_ranks: int
    shares: tuple[float, ...]

    @property
    def rule_id(self) -> str:
        return self.example.rule_id

    def lost_text(self) -> str:
        """ "lost median 12.3% (10.1%..14.0%)" of their windows, or "" when none has a share."""
        if not self.shares:
            return ""
        med, low, high = statistics.median(self.shares), self.shares[0], self.shares[-1]
        return f"lost median {100 * med:.1f}% ({100 * low:.1f}%..{100 * high:.1f}%) of the window"

    def headline(self) -> str:
        """ "optimizer: 1,017 of 1,024 ranks, lost median x% (min..max) of the window, e.g. rank 3" """
        lost = self.lost_text()
        return (
            f"{self.rule_id}: {len(self.ranks):,} of {self.of_ranks:,} ranks{f', {lost}' if lost else ''}, "
            f"e.g. rank {self.example.rank}"
        )


def group_findings(report: Report) -> list[Finding | FindingGroup]:
    """The report's findings with each rule's per-rank findings on several ranks as one group, at its first
    finding's place (a rank's several findings of one rule count it once)."""
    windows = {r.rank: r.window_us for r in report.ranks}
    by_rule: dict[str, list[Finding]] = {}
    for f in report.findings:
        if f.rank is not None:
            by_rule.setdefault(f.rule_id, []).append(f)
    ranks_of = {rule_id: sorted({f.rank for f in fs if f.rank is not None}) for rule_id, fs in by_rule.items()}
    out: list[Finding | FindingGroup] = []
    placed: set[str] = set()
    for f in report.findings:
        ranks = ranks_of.get(f.rule_id, []) if f.rank is not None else []
        if len(ranks) < 2:
            out.append(f)
        elif f.rule_id not in placed:
            placed.add(f.rule_id)
            shares = sorted(s for g in by_rule[f.rule_id] if (s := finding_share(g, windows)) is not None)
            out.append(FindingGroup(f, tuple(ranks), len(report.ranks), tuple(shares)))
    return out


class OutcomeGroup(msgspec.Struct, frozen=True):
    """A rule that could not run, with one status and reason, on ``ranks`` (empty: a cross-rank rule)."""

    outcome: RuleOutcome
    ranks: tuple[int, ...]


def group_outcomes(outcomes: Iterable[RuleOutcome]) -> list[OutcomeGroup]:
    """``outcomes`` (``Report.rules_not_run()``'s first) once per rule, status and reason, in their order."""
    groups: dict[tuple[str, str, str], list[RuleOutcome]] = {}
    for o in outcomes:
        groups.setdefault((o.rule_id, o.status, o.reason), []).append(o)
    return [OutcomeGroup(os[0], tuple(sorted({o.rank for o in os if o.rank is not None}))) for os in groups.values()]


def outcome_groups(outcomes: Iterable[RuleOutcome], *, grouped: bool) -> list[OutcomeGroup]:
    """``group_outcomes``' answer when ``grouped``, else one group per outcome (its own rank): one shape for the
    renderers of both views."""
    if grouped:
        return group_outcomes(outcomes)
    return [OutcomeGroup(o, () if o.rank is None else (o.rank,)) for o in outcomes]


def rank_ranges(ranks: Iterable[int], limit: int = MAX_RANGES) -> str:
    """Ascending ranks in words: "0-3, 5, 7-9"; past ``limit`` ranges, "... and N more ranks"."""
    spans: list[tuple[int, int]] = []
    for r in sorted(set(ranks)):
        if spans and r == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], r)
        else:
            spans.append((r, r))
    words = [str(a) if a == b else f"{a}-{b}" for a, b in spans[:limit]]
    rest = sum(b - a + 1 for a, b in spans[limit:])
    return ", ".join(words) + (f" and {rest:,} more ranks" if rest else "")


def ranks_by_step(ranks: Sequence[RankSummary], few: int = FEW_RANKS) -> tuple[list[RankSummary], list[RankSummary]]:
    """(the ``few`` slowest ranks by mean step time, slowest first; the ``few`` fastest not among them, fastest
    last). Ranks without steps are in neither; with none timed, the first ``few`` ranks are the first list."""
    timed = sorted((r for r in ranks if r.steps), key=lambda r: (-r.steps.mean_us if r.steps else 0.0, r.rank))
    if not timed:
        return list(ranks[:few]), []
    slowest = timed[:few]
    fastest = timed[max(few, len(timed) - few) :]
    return slowest, fastest

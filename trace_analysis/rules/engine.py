"""The rule registry and engine: select rules, resolve thresholds, run every rule on every rank.

A rule that raises is reported as an error outcome for that rank (logged with its traceback) rather than
aborting the report: one buggy rule must not hide the others' findings.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

import msgspec
from msgspec.structs import replace

from .base import CrossRankRule, Finding, Rule, ThresholdValue
from .context import RuleContext
from .digest import RankDigest
from .gpu_util import GpuStarvation, LowGpuUtil
from .gpu_work import ExposedComm, MemoryPressure, NoTensorCores, UnalignedGemm
from .host_bound import HostBound, LaunchOverhead
from .host_ops import CpuInitCopy, DataLoaderRule, DataParallelRule, OptimizerRule
from .launch import LaunchQueue, ShortKernels, SlowRuntimeCalls
from .op_overhead import TinyOps
from .straggler import Straggler
from .sync import PageableMemcpy, SyncCalls, SyncMemcpy, SyncMemset
from .thresholds import ThresholdError, resolve_thresholds

__all__ = [
    "ALL_RULES",
    "RankRules",
    "RuleOutcome",
    "RulesResult",
    "UnknownRuleError",
    "combine_rules",
    "has_cross_rank",
    "resolve_rule_thresholds",
    "run_rank_rules",
    "run_rules",
    "select_rules",
    "sort_findings",
    "with_offsets",
]

logger = logging.getLogger(__name__)

# Catalogue order (ANTIPATTERNS.md).
ALL_RULES: tuple[Rule | CrossRankRule, ...] = (
    LowGpuUtil(),
    GpuStarvation(),
    HostBound(),
    LaunchOverhead(),
    ShortKernels(),
    SlowRuntimeCalls(),
    LaunchQueue(),
    SyncCalls(),
    PageableMemcpy(),
    SyncMemcpy(),
    SyncMemset(),
    DataLoaderRule(),
    ExposedComm(),
    NoTensorCores(),
    UnalignedGemm(),
    MemoryPressure(),
    DataParallelRule(),
    OptimizerRule(),
    CpuInitCopy(),
    TinyOps(),
    Straggler(),
)


class UnknownRuleError(ThresholdError):
    """A --rules selection names a rule that does not exist."""


class RuleOutcome(msgspec.Struct, frozen=True):
    """What one rule did on one rank (``rank`` None for cross-rank rules)."""

    rule_id: str
    rank: int | None
    status: str  # "findings" | "clean" | "skipped" | "error"
    reason: str = ""
    enable_with: str | None = None
    findings: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "rule": self.rule_id,
            "rank": self.rank,
            "status": self.status,
            "reason": self.reason,
            "enable_with": self.enable_with,
            "findings": self.findings,
        }


class RulesResult(msgspec.Struct, frozen=True):
    findings: tuple[Finding, ...]
    outcomes: tuple[RuleOutcome, ...]
    thresholds: Mapping[str, Mapping[str, ThresholdValue]]


def select_rules(names: Iterable[str] | None) -> tuple[Rule | CrossRankRule, ...]:
    """Rules by id (comma-separated strings accepted); all rules for None/empty. ``-id`` excludes a rule."""
    if not names:
        return ALL_RULES
    by_id = {r.id: r for r in ALL_RULES}
    wanted = [n.strip() for name in names for n in name.split(",") if n.strip()]
    include = [n for n in wanted if not n.startswith("-")]
    exclude = {n[1:] for n in wanted if n.startswith("-")}
    for n in (*include, *exclude):
        if n not in by_id:
            raise UnknownRuleError(f"unknown rule {n!r} (rules: {', '.join(by_id)})")
    chosen = include or list(by_id)
    return tuple(by_id[n] for n in by_id if n in chosen and n not in exclude)


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Highest severity first, most time lost first within a severity; then rule id and rank (a stable order).

    Severity first: findings whose cost is not measurable (memory-pressure, data-parallel, no-tensor-cores) have no
    time lost, and capped symptoms or ``info`` findings (slow launches on a GPU-bound trace) can have much; sorted
    by time lost alone a high finding came after every low one, and an info one ("expected here") first. Within a
    rank severity follows the share of time lost, so this is the time-lost order wherever time is measured."""
    return sorted(
        findings,
        key=lambda f: (-f.severity.rank, -f.evidence.time_lost_us, f.rule_id, -1 if f.rank is None else f.rank),
    )


# One rank's per-rank rules, in the order given: each rule's outcome and its findings (placed on the rank's timeline).
RankRules = tuple[tuple[RuleOutcome, tuple[Finding, ...]], ...]


def has_cross_rank(rules: Iterable[Rule | CrossRankRule]) -> bool:
    """Whether ``rules`` compare ranks (then each rank's ``RankDigest`` is needed)."""
    return any(getattr(r, "cross_rank", False) for r in rules)


def resolve_rule_thresholds(thresholds: Mapping[str, object] | None) -> dict[str, dict[str, ThresholdValue]]:
    """Every rule's thresholds: its defaults with ``thresholds``' overrides (``resolve_thresholds``)."""
    return resolve_thresholds({r.id: r.thresholds for r in ALL_RULES}, thresholds)


def run_rules(
    ctxs: Sequence[RuleContext],
    rules: Sequence[Rule | CrossRankRule] | None = None,
    thresholds: Mapping[str, object] | None = None,
) -> RulesResult:
    rules = tuple(rules) if rules is not None else ALL_RULES
    resolved = resolve_rule_thresholds(thresholds)
    digests = [RankDigest.of(c) for c in ctxs] if has_cross_rank(rules) else []
    return combine_rules([run_rank_rules(c, rules, resolved) for c in ctxs], digests, rules, resolved)


def run_rank_rules(
    ctx: RuleContext, rules: Sequence[Rule | CrossRankRule], resolved: Mapping[str, Mapping[str, ThresholdValue]]
) -> RankRules:
    """The per-rank ``rules`` on one rank (``resolved``: ``resolve_thresholds``' answer); cross-rank ones are left
    to ``combine_rules``."""
    out = []
    for rule in rules:
        if getattr(rule, "cross_rank", False):
            continue
        sink: list[Finding] = []
        outcome = _run_one(rule, ctx, resolved[rule.id], sink)  # type: ignore[arg-type]
        out.append((outcome, tuple(sink)))
    return tuple(out)


def combine_rules(
    per_rank: Sequence[RankRules],
    digests: Sequence[RankDigest],
    rules: Sequence[Rule | CrossRankRule],
    resolved: Mapping[str, Mapping[str, ThresholdValue]],
) -> RulesResult:
    """The ranks' ``run_rank_rules`` answers (in rank order) and the cross-rank rules over their ``digests``, as one
    result: outcomes rule by rule, each rule's rank by rank; findings sorted (``sort_findings``)."""
    findings: list[Finding] = []
    outcomes: list[RuleOutcome] = []
    i = 0  # the rule's place in each rank's answer (cross-rank rules have none)
    for rule in rules:
        if getattr(rule, "cross_rank", False):
            outcomes.append(_run_cross(rule, digests, resolved[rule.id], findings))  # type: ignore[arg-type]
            continue
        for rank_rules in per_rank:
            outcome, got = rank_rules[i]
            outcomes.append(outcome)
            findings.extend(got)
        i += 1
    return RulesResult(tuple(sort_findings(findings)), tuple(outcomes), resolved)


def _run_one(rule: Rule, ctx: RuleContext, th: Mapping[str, ThresholdValue], sink: list[Finding]) -> RuleOutcome:
    try:
        skip = rule.applies(ctx)
        if skip is not None:
            return RuleOutcome(rule.id, ctx.rank, "skipped", skip.reason, skip.enable_with)
        got = rule.run(ctx, th)
    except Exception as e:  # noqa: BLE001 - a buggy rule becomes an error outcome, not a lost report
        logger.exception("rule %s failed on rank %s", rule.id, ctx.rank)
        return RuleOutcome(rule.id, ctx.rank, "error", f"{type(e).__name__}: {e}")
    sink.extend(with_offsets(f, ctx.span[0]) for f in got)
    return RuleOutcome(rule.id, ctx.rank, "findings" if got else "clean", findings=len(got))


def with_offsets(finding: Finding, origin_us: float) -> Finding:
    """``finding`` with each example's ``offset_us`` set from ``origin_us`` (its rank's trace start), so that a
    report can say "at +1.234 s" beside the absolute ``ts`` (a 16-digit epoch µs says nothing about where in the
    trace the event is). Examples a rule already placed keep their offset."""
    ex = finding.evidence.examples
    if not ex or all(e.offset_us is not None for e in ex):
        return finding
    placed = tuple(e if e.offset_us is not None else replace(e, offset_us=e.ts_us - origin_us) for e in ex)
    return replace(finding, evidence=replace(finding.evidence, examples=placed))


def _run_cross(
    rule: CrossRankRule, ranks: Sequence[RankDigest], th: Mapping[str, ThresholdValue], sink: list[Finding]
) -> RuleOutcome:
    try:
        skip = rule.applies_ranks(ranks)
        if skip is not None:
            return RuleOutcome(rule.id, None, "skipped", skip.reason, skip.enable_with)
        failed = next((r.error for r in ranks if r.error is not None), None)
        if failed is not None:  # a rank's figures could not be computed (logged by RankDigest.of)
            return RuleOutcome(rule.id, None, "error", failed)
        got = rule.run_ranks(ranks, th)
    except Exception as e:  # noqa: BLE001
        logger.exception("rule %s failed", rule.id)
        return RuleOutcome(rule.id, None, "error", f"{type(e).__name__}: {e}")
    origin = {r.rank: r.span[0] for r in ranks}
    # a finding about one rank is placed on that rank's timeline; a job-level one on the earliest rank's start
    first = min(origin.values(), default=0.0)
    sink.extend(with_offsets(f, origin.get(f.rank, first) if f.rank is not None else first) for f in got)
    reason = f"compared {len(ranks)} ranks"
    return RuleOutcome(rule.id, None, "findings" if got else "clean", reason, findings=len(got))

"""Values and the protocol shared by every antipattern rule.

A rule is a small object with an ``id``, a dict of default ``thresholds``, ``applies(ctx)`` (``None`` when it can
run, else a :class:`Skip` naming what is missing and which trace option would provide it) and
``run(ctx, thresholds) -> list[Finding]``. Rules read a :class:`~dyno.trace_analysis.rules.context.RuleContext`
(numpy views over one rank's trace model), never raw JSON, so every rule is vectorized.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import msgspec

if TYPE_CHECKING:
    from .context import RuleContext
    from .digest import RankDigest

__all__ = [
    "Example",
    "Evidence",
    "Finding",
    "Rule",
    "CrossRankRule",
    "Severity",
    "Share",
    "Skip",
    "ThresholdValue",
    "count_of",
    "severity_for_share",
]

ThresholdValue = float | int | bool


def count_of(n: int, word: str, words: str | None = None) -> str:
    """``n`` and the noun for it: "1 call", "2 calls" (``words``: an irregular plural, e.g. "copies")."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


class Share(float):
    """A threshold default that is a share (a fraction 0..1, e.g. ``"min_util": Share(0.5)``): an override above
    1 is rejected (``40`` would be 4000%; ``40%`` is the percent form). Resolved thresholds are plain floats."""

    __slots__ = ()


class Severity(str, enum.Enum):
    """How much a finding matters. Ordered: HIGH > MEDIUM > LOW > INFO."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    INFO = "info"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.HIGH: 3, Severity.MEDIUM: 2, Severity.LOW: 1, Severity.INFO: 0}

# Severity policy (docs/ANALYSIS_REPORT.md): a finding's severity follows the share of the analysed window
# (the step when ProfilerStep markers exist, else the trace span) that it costs. A rule whose cost cannot be
# measured in time picks a fixed severity and says why in its docstring.
HIGH_SHARE = 0.20
MEDIUM_SHARE = 0.05


def severity_for_share(share: float | None, *, floor: Severity = Severity.LOW) -> Severity:
    """Map a lost-time share (0..1) to a severity; ``floor`` is the result for tiny or unknown shares."""
    if share is not None:
        if share >= HIGH_SHARE:
            return Severity.HIGH
        if share >= MEDIUM_SHARE:
            return Severity.MEDIUM if floor.rank <= Severity.MEDIUM.rank else floor
    return floor


class Example(msgspec.Struct, frozen=True):
    """One event a user can look up in Perfetto / chrome://tracing (``ts`` is the trace's own µs clock)."""

    name: str
    ts_us: float
    dur_us: float
    where: str = ""  # e.g. "stream 7", "tid 1234"
    # µs from the start of the rank's trace (its first event) to ``ts_us``: where the event is on a timeline that
    # starts at 0 (Perfetto's). Set by the engine for every finding of a rank; None when unknown.
    offset_us: float | None = None
    # what the example shows beyond the event itself, e.g. for a GPU idle gap what the launching host thread did
    # meanwhile ("host tid 12: cudaFree 6.53 s (65%, 2 calls), ..."); None when there is nothing to add
    note: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "ts_us": self.ts_us,
            "offset_us": self.offset_us,
            "dur_us": self.dur_us,
            "where": self.where,
            "note": self.note,
        }


class Evidence(msgspec.Struct, frozen=True):
    """What a finding rests on. ``time_lost_us`` orders findings; ``share`` is of the analysed window, or of what
    ``share_of`` names ("GPU span": the rules about GPU time on a trace without steps).

    ``time_lost_basis``: what ``time_lost_us`` measures, where a rule states it (its definition, in words).
    ``no_time_lost_reason``: why ``time_lost_us`` is 0 when the rule judged there is no loss (e.g. slow launches
    on a GPU-bound trace); a 0 without a reason means the cost cannot be measured from a trace."""

    time_lost_us: float = 0.0
    share: float | None = None
    counts: Mapping[str, float | int] = msgspec.field(default_factory=dict)  # int counts stay ints in the JSON report
    examples: Sequence[Example] = ()
    share_of: str | None = None
    time_lost_basis: str | None = None
    no_time_lost_reason: str | None = None

    @property
    def measurable(self) -> bool:
        """Whether ``time_lost_us`` is a measured figure (a loss, or none for a stated reason)."""
        return self.time_lost_us > 0 or self.no_time_lost_reason is not None

    def to_dict(self) -> dict[str, object]:
        return {
            "time_lost_us": self.time_lost_us,
            "time_lost_basis": self.time_lost_basis,
            "no_time_lost_reason": self.no_time_lost_reason,
            "share": self.share,
            "share_of": self.share_of,
            "counts": dict(self.counts),
            "examples": [e.to_dict() for e in self.examples],
        }


class Finding(msgspec.Struct, frozen=True):
    rule_id: str
    severity: Severity
    title: str
    evidence: Evidence
    fix: str
    rank: int | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "rule": self.rule_id,
            "severity": self.severity.value,
            "title": self.title,
            "rank": self.rank,
            "evidence": self.evidence.to_dict(),
            "fix": self.fix,
        }


class Skip(msgspec.Struct, frozen=True):
    """Why a rule did not run on a trace, and what trace option would let it run (``None`` when none would)."""

    reason: str
    enable_with: str | None = None


class _Described(Protocol):
    """What every rule exposes to the engine and the report, per-rank or cross-rank."""

    @property
    def id(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def fix(self) -> str: ...

    @property
    def thresholds(self) -> Mapping[str, ThresholdValue]: ...


@runtime_checkable
class Rule(_Described, Protocol):
    """A per-rank rule. ``id``, ``title``, ``fix`` and ``thresholds`` (defaults) are usually class attributes."""

    def applies(self, ctx: RuleContext) -> Skip | None: ...

    def run(self, ctx: RuleContext, thresholds: Mapping[str, ThresholdValue]) -> list[Finding]: ...


@runtime_checkable
class CrossRankRule(_Described, Protocol):
    """A rule over all ranks of one job (e.g. stragglers); ``cross_rank`` is True. It reads each rank's digest
    (``rules.digest``), not its trace: the traces are let go once each rank is analysed."""

    @property
    def cross_rank(self) -> bool: ...

    def applies_ranks(self, ranks: Sequence[RankDigest]) -> Skip | None: ...

    def run_ranks(self, ranks: Sequence[RankDigest], thresholds: Mapping[str, ThresholdValue]) -> list[Finding]: ...

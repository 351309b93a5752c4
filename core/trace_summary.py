"""The compact summary of one trace's host-side analysis: what dynod keeps with a job's record, serves through
GetTraceSummary and ListJobs, and what ``dyno-cli opportunities`` ranks by.

One plain, typed form shared by the analysis worker (which writes it as JSON), the daemon (which stores it and
converts it to dyno.v1.TraceSummary: ``dyno.trace_summary_pb``) and the client. The per-rank parts that the
cross-rank merge needs travel beside it as opaque bytes (``rank_parts``: ``dyno.trace_analysis.part_codec``).

``from_json`` checks every field: the worker's output is data from a process that read untrusted traces.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

__all__ = [
    "AnalysisFailure",
    "AnalysisState",
    "RankStepStats",
    "RuleLoss",
    "SUMMARY_SCHEMA",
    "SUMMARY_VERSION",
    "SummaryFormatError",
    "TraceSummary",
    "PERIODIC_PREFIX",
    "newness",
]

SUMMARY_SCHEMA = "dyno.trace_summary"
SUMMARY_VERSION = 1
PERIODIC_PREFIX = "periodic-"  # trace ids the daemon's periodic profiling chooses
_MAX_TEXT = 1024  # titles, fixes, messages: cut to this many characters
_MAX_RULES = 64
_MAX_RANKS = 4096


class SummaryFormatError(ValueError):
    """A summary document that is not what ``TraceSummary.to_json`` writes."""


class AnalysisState(str, enum.Enum):
    """dyno.v1.AnalysisState without its prefix."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    DONE = "DONE"
    FAILED = "FAILED"
    DISABLED = "DISABLED"


class AnalysisFailure(str, enum.Enum):
    """dyno.v1.AnalysisFailure without its prefix (NONE: UNSPECIFIED)."""

    NONE = "NONE"
    NO_TRACE = "NO_TRACE"
    CRASHED = "CRASHED"
    TIMED_OUT = "TIMED_OUT"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    BAD_OUTPUT = "BAD_OUTPUT"
    TRACE_FAILED = "TRACE_FAILED"


@dataclass(frozen=True)
class RuleLoss:
    """One rule's findings in a trace. ``time_lost_share``: of the analysed window, averaged over the ranks analysed
    (a rank without the rule's finding counts 0)."""

    rule: str
    severity: str
    time_lost_share: float
    time_lost_us: float = 0.0
    ranks: int = 0
    title: str = ""
    fix: str = ""


@dataclass(frozen=True)
class RankStepStats:
    """One rank's steps (µs) and GPU time shares (0..1 of its GPU span)."""

    rank: int
    steps: int = 0
    mean_step_us: float = 0.0
    median_step_us: float = 0.0
    std_step_us: float = 0.0
    max_step_us: float = 0.0
    window_us: float = 0.0
    has_gpu: bool = False
    gpu_idle_share: float = 0.0
    gpu_compute_share: float = 0.0
    communication_share: float = 0.0
    exposed_communication_share: float = 0.0


@dataclass(frozen=True)
class TraceSummary:
    trace_id: str
    job_id: str = ""
    user: str = ""
    hostname: str = ""
    periodic: bool = False
    state: AnalysisState = AnalysisState.PENDING
    failure: AnalysisFailure = AnalysisFailure.NONE
    failure_message: str = ""
    trace_finished_ms: int = 0
    analyzed_ms: int = 0
    analysis_cpu_s: float = 0.0
    rules: tuple[RuleLoss, ...] = ()
    ranks: tuple[RankStepStats, ...] = ()
    analysed_window: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)  # unknown keys of a newer writer, kept as read

    @property
    def finished(self) -> bool:
        return self.state in (AnalysisState.DONE, AnalysisState.FAILED)

    def share_of(self, rule: str) -> float:
        """``rule``'s time-lost share (0 when it has no finding here)."""
        return next((r.time_lost_share for r in self.rules if r.rule == rule), 0.0)

    def failed(self, failure: AnalysisFailure, message: str, analyzed_ms: int) -> TraceSummary:
        return replace(
            self,
            state=AnalysisState.FAILED,
            failure=failure,
            failure_message=message[:_MAX_TEXT],
            analyzed_ms=analyzed_ms,
            rules=(),
            ranks=(),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SUMMARY_SCHEMA,
            "version": SUMMARY_VERSION,
            "trace_id": self.trace_id,
            "job_id": self.job_id,
            "user": self.user,
            "hostname": self.hostname,
            "periodic": self.periodic,
            "state": self.state.value,
            "failure": self.failure.value,
            "failure_message": self.failure_message,
            "trace_finished_ms": self.trace_finished_ms,
            "analyzed_ms": self.analyzed_ms,
            "analysis_cpu_s": self.analysis_cpu_s,
            "analysed_window": self.analysed_window,
            "rules": [vars(r).copy() for r in self.rules],
            "ranks": [vars(r).copy() for r in self.ranks],
        }

    @classmethod
    def from_json(cls, doc: object) -> TraceSummary:
        """The summary ``doc`` (``to_json``'s form) holds; ``SummaryFormatError`` naming the first bad field."""
        d = _mapping(doc, "summary")
        if d.get("schema") != SUMMARY_SCHEMA:
            raise SummaryFormatError(f"not a {SUMMARY_SCHEMA} document (schema {d.get('schema')!r})")
        version = d.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise SummaryFormatError(f"bad version {version!r}")
        rules = _list(d.get("rules", []), "rules", _MAX_RULES)
        ranks = _list(d.get("ranks", []), "ranks", _MAX_RANKS)
        known = set(cls.__dataclass_fields__) | {"schema", "version"}
        return cls(
            trace_id=_text(d, "trace_id", required=True),
            job_id=_text(d, "job_id"),
            user=_text(d, "user"),
            hostname=_text(d, "hostname"),
            periodic=_flag(d, "periodic"),
            state=_enum(AnalysisState, d.get("state", "PENDING"), "state"),
            failure=_enum(AnalysisFailure, d.get("failure", "NONE"), "failure"),
            failure_message=_text(d, "failure_message"),
            trace_finished_ms=_int(d, "trace_finished_ms"),
            analyzed_ms=_int(d, "analyzed_ms"),
            analysis_cpu_s=_num(d, "analysis_cpu_s"),
            analysed_window=_text(d, "analysed_window"),
            rules=tuple(_rule(_mapping(r, "rules[]")) for r in rules),
            ranks=tuple(_rank(_mapping(r, "ranks[]")) for r in ranks),
            extra={k: v for k, v in d.items() if k not in known},
        )


def _rule(d: Mapping[str, Any]) -> RuleLoss:
    return RuleLoss(
        rule=_text(d, "rule", required=True),
        severity=_text(d, "severity"),
        time_lost_share=_num(d, "time_lost_share"),
        time_lost_us=_num(d, "time_lost_us"),
        ranks=_int(d, "ranks"),
        title=_text(d, "title"),
        fix=_text(d, "fix"),
    )


def _rank(d: Mapping[str, Any]) -> RankStepStats:
    return RankStepStats(
        rank=_int(d, "rank", signed=True),
        steps=_int(d, "steps"),
        mean_step_us=_num(d, "mean_step_us"),
        median_step_us=_num(d, "median_step_us"),
        std_step_us=_num(d, "std_step_us"),
        max_step_us=_num(d, "max_step_us"),
        window_us=_num(d, "window_us"),
        has_gpu=_flag(d, "has_gpu"),
        gpu_idle_share=_num(d, "gpu_idle_share"),
        gpu_compute_share=_num(d, "gpu_compute_share"),
        communication_share=_num(d, "communication_share"),
        exposed_communication_share=_num(d, "exposed_communication_share"),
    )


def _mapping(v: object, what: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise SummaryFormatError(f"{what}: expected an object, got {type(v).__name__}")
    return v


def _list(v: object, what: str, most: int) -> list[Any]:
    if not isinstance(v, list):
        raise SummaryFormatError(f"{what}: expected a list, got {type(v).__name__}")
    if len(v) > most:
        raise SummaryFormatError(f"{what}: {len(v)} entries, at most {most}")
    return v


def _text(d: Mapping[str, Any], key: str, required: bool = False) -> str:
    v = d.get(key, "")
    if not isinstance(v, str) or (required and not v):
        raise SummaryFormatError(f"{key}: expected {'a non-empty' if required else 'a'} string, got {v!r:.80}")
    return v[:_MAX_TEXT]


def _flag(d: Mapping[str, Any], key: str) -> bool:
    v = d.get(key, False)
    if not isinstance(v, bool):
        raise SummaryFormatError(f"{key}: expected true/false, got {v!r:.80}")
    return v


def _int(d: Mapping[str, Any], key: str, signed: bool = False) -> int:
    v = d.get(key, 0)
    if not isinstance(v, int) or isinstance(v, bool) or (v < 0 and not signed) or abs(v) >= 2**63:
        raise SummaryFormatError(f"{key}: expected {'an' if signed else 'a non-negative'} integer, got {v!r:.80}")
    return v


def _num(d: Mapping[str, Any], key: str) -> float:
    v = d.get(key, 0.0)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise SummaryFormatError(f"{key}: expected a finite non-negative number, got {v!r:.80}")
    return float(v)


def _enum(cls: type[enum.Enum], v: object, key: str) -> Any:
    try:
        return cls(v)
    except ValueError:
        raise SummaryFormatError(f"{key}: unknown value {v!r:.80}") from None


class _Timed(Protocol):
    """A summary as this module or dyno.v1.TraceSummary holds it: the two times that order a job's analyses."""

    @property
    def trace_finished_ms(self) -> int: ...

    @property
    def analyzed_ms(self) -> int: ...


def newness(s: _Timed) -> tuple[int, int]:
    """What orders one job's analyses (decision 68), the greater the newer: its trace's end, then its analysis' (an
    older trace analysed later, after a restart or on request, is not the job's latest). The client's joins of a
    job's records compare these, their columns' readers the same pair (dyno.client.column_pages.newest_first)."""
    return (s.trace_finished_ms, s.analyzed_ms)

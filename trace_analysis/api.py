"""Library entry point: ``dyno.trace_analysis.analyze(paths) -> Report``.

Loads every path (a trace file, or a folder of per-rank files), runs every selected rule on every rank and
across ranks, and returns the :class:`~dyno.trace_analysis.report.model.Report` that the renderers print.
A file that fails to load is recorded in ``Report.errors``; the others are analysed. When nothing loads,
:class:`AnalysisError` is raised with the reasons.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence

import msgspec

from .loader import TraceLoadError, load_traces
from .model import Trace
from .report.model import LoadProblem, RankSummary, Report
from .report.summary import summarize_rank
from .rules import CrossRankRule, Rule, RuleContext, ThresholdError, select_rules
from .rules.base import ThresholdValue
from .rules.digest import RankDigest
from .rules.engine import RankRules, combine_rules, has_cross_rank, resolve_rule_thresholds, run_rank_rules

__all__ = ["AnalysisError", "RankPart", "analyze", "analyze_rank", "analyze_traces", "report_of"]

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]
Rules = tuple[Rule | CrossRankRule, ...]
Resolved = Mapping[str, Mapping[str, ThresholdValue]]


class AnalysisError(Exception):
    """Nothing could be analysed (every input failed to load); the message names each file and why."""


class RankPart(msgspec.Struct, frozen=True):
    """One rank analysed: what the report needs of it once its trace is let go (the per-rank rules' outcomes and
    findings, its summary, and the digest the cross-rank rules read)."""

    rank: int
    source: str
    summary: RankSummary
    rules: RankRules
    digest: RankDigest | None  # None when no cross-rank rule runs


def analyze(
    paths: PathLike | Iterable[PathLike],
    rules: Iterable[str] | None = None,
    thresholds: Mapping[str, object] | None = None,
    *,
    workers: int | None = None,
) -> Report:
    """Analyse trace files / folders of per-rank traces.

    ``rules``: rule ids to run (default all; ``"-id"`` excludes one). ``thresholds``: overrides as
    ``{"rule.key": value}`` or ``{"rule": {"key": value}}``. ``workers``: processes for a job of several ranks
    (``rank_pool``; None: one per core when the traces are large enough to gain from it; 1: this process only).
    The report is the same whatever ``workers``. Raises ``ThresholdError`` / ``UnknownRuleError`` (both
    ``ValueError``) for bad rules or thresholds, ``AnalysisError`` when no trace loads.
    """
    if isinstance(rules, str):
        rules = [rules]  # one id or "a,b": not a sequence of one-letter ids
    selected = select_rules(list(rules) if rules is not None else None)
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    path_list = [os.fspath(p) for p in paths]
    if workers != 1 and (len(path_list) > 1 or (path_list and os.path.isdir(path_list[0]))):  # one file: no pool
        pooled = _analyze_in_pool(path_list, selected, thresholds, workers)
        if pooled is not None:
            return pooled
    traces: list[Trace] = []
    problems: list[LoadProblem] = []
    try:
        # one job: the loader reports bad files and duplicate ranks, and loads the rest
        multi = load_traces(path_list)
    except TraceLoadError as e:
        problems.append(LoadProblem(str(e.path), e.reason))
    except OSError as e:
        problems.append(LoadProblem(e.filename or ", ".join(path_list), e.strerror or str(e)))
    else:
        traces.extend(multi)
        problems.extend(LoadProblem(err.path, err.reason) for err in multi.errors)
    if not traces:
        detail = "; ".join(f"{e.path}: {e.reason}" for e in problems) or "no trace files found"
        raise AnalysisError(f"no trace could be analysed ({detail})")
    return analyze_traces(
        traces, selected_ids=[r.id for r in selected], thresholds=thresholds, errors=problems, sources=path_list
    )


def _analyze_in_pool(
    paths: list[str], rules: Rules, thresholds: Mapping[str, object] | None, workers: int | None
) -> Report | None:
    """``rank_pool.analyze_in_pool``, or None where this process does it all: a bad threshold (reported after the
    load, as there), or what the pool leaves (one rank, small traces, files whose ranks the loader must sort out)."""
    try:
        resolved = resolve_rule_thresholds(thresholds)
    except ThresholdError:
        return None
    from .rank_pool import analyze_in_pool  # multiprocessing: loaded only for a job of several ranks

    return analyze_in_pool(paths, rules, resolved, workers)


def analyze_traces(
    traces: Iterable[Trace],
    selected_ids: Iterable[str] | None = None,
    thresholds: Mapping[str, object] | None = None,
    errors: Iterable[LoadProblem] = (),
    sources: Iterable[str] = (),
) -> Report:
    """Analyse already loaded traces (one per rank). ``selected_ids``: the rules to run (None: all; empty: none,
    e.g. when every rule was excluded)."""
    ids = None if selected_ids is None else list(selected_ids)
    rules = select_rules(ids) if ids is None or ids else ()
    resolved = resolve_rule_thresholds(thresholds)
    parts = [analyze_rank(t, rules, resolved) for t in sorted(traces, key=lambda t: t.rank)]
    return report_of(parts, rules, resolved, errors, sources)


def analyze_rank(trace: Trace, rules: Rules, resolved: Resolved) -> RankPart:
    """One rank's part of the report (``resolved``: ``resolve_thresholds``' answer)."""
    ctx = RuleContext(trace)
    return RankPart(
        ctx.rank,
        ctx.source,
        summarize_rank(ctx),
        run_rank_rules(ctx, rules, resolved),
        RankDigest.of(ctx) if has_cross_rank(rules) else None,
    )


def report_of(
    parts: Sequence[RankPart], rules: Rules, resolved: Resolved, errors: Iterable[LoadProblem], sources: Iterable[str]
) -> Report:
    """The report over the ranks' parts (in rank order): the cross-rank rules run here, over their digests."""
    digests = [p.digest for p in parts if p.digest is not None]
    result = combine_rules([p.rules for p in parts], digests, rules, resolved)
    return Report(
        sources=tuple(sources) or tuple(p.source for p in parts),
        ranks=tuple(p.summary for p in parts),
        findings=result.findings,
        rules=result.outcomes,
        thresholds=result.thresholds,
        errors=tuple(errors),
    )

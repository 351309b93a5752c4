"""Library entry point: ``dyno.trace_analysis.analyze(paths) -> Report``.

Loads every path (a trace file, or a folder of per-rank files), runs every selected rule on every rank and
across ranks, and returns the :class:`~dyno.trace_analysis.report.model.Report` that the renderers print.
A file that fails to load is recorded in ``Report.errors``; the others are analysed. When nothing loads,
:class:`AnalysisError` is raised with the reasons.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping

from .loader import TraceLoadError, load_traces
from .model import Trace
from .report.model import LoadProblem, Report
from .report.summary import summarize_rank
from .rules import RuleContext, run_rules, select_rules

__all__ = ["AnalysisError", "analyze", "analyze_traces"]

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]


class AnalysisError(Exception):
    """Nothing could be analysed (every input failed to load); the message names each file and why."""


def analyze(
    paths: PathLike | Iterable[PathLike],
    rules: Iterable[str] | None = None,
    thresholds: Mapping[str, object] | None = None,
) -> Report:
    """Analyse trace files / folders of per-rank traces.

    ``rules``: rule ids to run (default all; ``"-id"`` excludes one). ``thresholds``: overrides as
    ``{"rule.key": value}`` or ``{"rule": {"key": value}}``. Raises ``ThresholdError`` / ``UnknownRuleError``
    (both ``ValueError``) for bad rules or thresholds, ``AnalysisError`` when no trace loads.
    """
    if isinstance(rules, str):
        rules = [rules]  # one id or "a,b": not a sequence of one-letter ids
    selected = select_rules(list(rules) if rules is not None else None)
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    path_list = [os.fspath(p) for p in paths]
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


def analyze_traces(
    traces: Iterable[Trace],
    selected_ids: Iterable[str] | None = None,
    thresholds: Mapping[str, object] | None = None,
    errors: Iterable[LoadProblem] = (),
    sources: Iterable[str] = (),
) -> Report:
    """Analyse already loaded traces (one per rank). ``selected_ids``: the rules to run (None: all; empty: none,
    e.g. when every rule was excluded)."""
    ctxs = sorted((RuleContext(t) for t in traces), key=lambda c: c.rank)
    ids = None if selected_ids is None else list(selected_ids)
    result = run_rules(ctxs, select_rules(ids) if ids is None or ids else (), thresholds)
    return Report(
        sources=tuple(sources) or tuple(c.source for c in ctxs),
        ranks=tuple(summarize_rank(c) for c in ctxs),
        findings=result.findings,
        rules=result.outcomes,
        thresholds=result.thresholds,
        errors=tuple(errors),
    )

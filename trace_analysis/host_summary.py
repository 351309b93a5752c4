"""One host's analysis of a trace, as dynod's analysis worker keeps it: ``summarize_trace(paths, trace_id=...)``.

It loads this host's files of the trace, analyses each rank (``api.analyze_rank``), runs the cross-rank rules over
the local ranks (``api.report_of``) and returns a ``HostAnalysis``: the compact ``dyno.trace_summary.TraceSummary``
(what the job's record, ListJobs and ``dyno-cli opportunities`` read) and the ranks' parts encoded for the wire
(``part_codec``: what ``dyno-cli trace --summaries`` merges across hosts into the job-wide report).

The summary's ``job_id``, ``user``, ``hostname``, ``periodic`` and ``trace_finished_ms`` are left for the daemon,
which knows them. Everything runs in this process (the worker is the separate process); numpy is imported when
``summarize_trace`` runs, not with this module.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dyno.trace_summary import AnalysisState, RankStepStats, RuleLoss, TraceSummary

if TYPE_CHECKING:
    from .api import RankPart
    from .report.model import RankSummary, Report
    from .rules.base import Finding

__all__ = ["DEFAULT_MAX_PARTS_BYTES", "HostAnalysis", "rule_losses", "step_stats", "summarize_trace"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_PARTS_BYTES = 3 * 2**20  # dyno.v1.TraceSummary.rank_parts' bound


@dataclass(frozen=True)
class HostAnalysis:
    """``rank_parts``: ``part_codec.encode_parts``' bytes, empty when even the thinned parts did not fit (then
    ``thinned`` is True too); ``thinned``: parts of the report were left out to fit ``max_parts_bytes``."""

    summary: TraceSummary
    rank_parts: bytes
    thinned: bool


def summarize_trace(
    paths: Sequence[str], *, trace_id: str, max_parts_bytes: int = DEFAULT_MAX_PARTS_BYTES
) -> HostAnalysis:
    """Analyse this host's files of trace ``trace_id`` (files or folders), every rule with its default thresholds.
    Raises ``api.AnalysisError`` naming each file and why when none loads; files that fail beside others that load
    are left out (logged)."""
    from .api import AnalysisError, analyze_rank, report_of
    from .loader import TraceLoadError, load_traces
    from .part_codec import PartsTooLargeError, encode_parts
    from .rules import select_rules
    from .rules.engine import resolve_rule_thresholds

    cpu0 = time.process_time()
    try:
        loaded = load_traces(list(paths))
    except TraceLoadError as e:
        raise AnalysisError(f"no trace could be analysed ({e.path}: {e.reason})") from None
    except OSError as e:
        raise AnalysisError(f"no trace could be analysed ({e.filename}: {e.strerror or e})") from None
    if not len(loaded):
        detail = "; ".join(f"{e.path}: {e.reason}" for e in loaded.errors) or "no trace files found"
        raise AnalysisError(f"no trace could be analysed ({detail})")
    for err in loaded.errors:
        logger.warning("trace %s: %s left out: %s", trace_id, err.path, err.reason)
    rules = select_rules(None)
    resolved = resolve_rule_thresholds(None)
    parts = [analyze_rank(t, rules, resolved) for t in loaded]  # in rank order
    del loaded  # the traces are let go; the parts are what is kept
    report = report_of(parts, rules, resolved, (), ())
    try:
        rank_parts, thinned = encode_parts(parts, max_parts_bytes)
    except PartsTooLargeError as e:  # the summary still stands; the client names this host as unmergeable
        logger.warning("trace %s: rank parts left out: %s", trace_id, e)
        rank_parts, thinned = b"", True
    summary = TraceSummary(
        trace_id=trace_id,
        state=AnalysisState.DONE,
        analyzed_ms=int(time.time() * 1000),
        analysis_cpu_s=max(0.0, time.process_time() - cpu0),
        rules=rule_losses(report, parts),
        ranks=tuple(step_stats(s) for s in report.ranks),
        analysed_window=_window_text(report.ranks),
    )
    return HostAnalysis(summary, rank_parts, thinned)


def rule_losses(report: Report, parts: Sequence[RankPart]) -> tuple[RuleLoss, ...]:
    """One ``RuleLoss`` per rule with findings in ``report`` (over ``parts``, its ranks), most time lost first.

    ``time_lost_share``: the mean over the ranks analysed of each rank's summed share of its window lost to the rule's
    findings (a finding's ``Evidence.share``; without one, its ``time_lost_us`` over the rank's window; a rank without
    a finding counts 0), at most 1. A cross-rank finding (straggler) is a loss of every rank: the others wait for the
    straggler in their collectives, so its share counts for every rank analysed (once in the mean, not divided by the
    number of ranks). ``time_lost_us`` is summed over the findings; ``ranks`` counts the ranks a finding names."""
    from .report.rank_groups import finding_share  # the report's modules load numpy: not at this module's import

    windows = {s.rank: s.window_us for s in report.ranks}
    n = max(1, len(parts))
    cross = {o.rule_id for o in report.rules if o.rank is None}  # cross-rank rules' outcomes have no rank
    by_rule: dict[str, list[Finding]] = {}
    for f in report.findings:  # sorted: the first of a rule is its most severe, most costly one
        by_rule.setdefault(f.rule_id, []).append(f)
    out = []
    for rule_id, found in by_rule.items():
        per_rank: dict[int | None, float] = {}
        for f in found:
            share = finding_share(f, windows) or 0.0
            key = None if rule_id in cross else f.rank
            per_rank[key] = per_rank.get(key, 0.0) + share
        if rule_id in cross:
            mean = per_rank.get(None, 0.0)
        else:
            mean = sum(min(1.0, s) for s in per_rank.values()) / n
        out.append(
            RuleLoss(
                rule=rule_id,
                severity=max((f.severity for f in found), key=lambda s: s.rank).name,
                time_lost_share=min(1.0, max(0.0, mean)),
                time_lost_us=sum(max(0.0, f.evidence.time_lost_us) for f in found),
                ranks=len({f.rank for f in found if f.rank is not None}),
                title=found[0].title,
                fix=found[0].fix,
            )
        )
    return tuple(sorted(out, key=lambda r: (-r.time_lost_share, -r.time_lost_us, r.rule)))


def step_stats(s: RankSummary) -> RankStepStats:
    """A rank's steps (none: 0s) and its GPU time shares of its GPU span (no GPU activity: 0s)."""
    st, b = s.steps, s.breakdown
    return RankStepStats(
        rank=s.rank,
        steps=st.count if st else 0,
        mean_step_us=st.mean_us if st else 0.0,
        median_step_us=st.median_us if st else 0.0,
        std_step_us=st.std_us if st else 0.0,
        max_step_us=st.max_us if st else 0.0,
        window_us=s.window_us,
        has_gpu=s.has_gpu,
        gpu_idle_share=b.share(b.idle_us) if b else 0.0,
        gpu_compute_share=b.share(b.compute_us) if b else 0.0,
        communication_share=b.share(b.communication_us) if b else 0.0,
        exposed_communication_share=b.share(b.exposed_communication_us) if b else 0.0,
    )


def _window_text(ranks: Sequence[RankSummary]) -> str:
    """The analysed window in words: one text when every rank has the same ("5 profiler steps"), else each distinct
    one with its ranks ("5 profiler steps (ranks 0, 1); trace span (rank 2)")."""
    texts: dict[str, list[int]] = {}
    for s in ranks:
        texts.setdefault(s.window_text, []).append(s.rank)
    if len(texts) <= 1:
        return next(iter(texts), "")
    return "; ".join(
        f"{t} (rank{'s' if len(rs) > 1 else ''} {', '.join(str(r) for r in rs)})" for t, rs in texts.items()
    )

"""Terminal report: summary per rank, then findings by severity and time lost (with fixes), then top tables.

Past ``rank_groups.RANK_THRESHOLD`` ranks (unless ``all_ranks``), the cross-rank view instead (``cross_rank_text``):
a table of the slowest and fastest ranks, a rule's findings on many ranks as one line, the slowest rank's tables."""

from __future__ import annotations

import statistics
import textwrap

from ..rules.base import Finding
from ..units import clip_name, fmt_us
from .model import Breakdown, RankSummary, Report, TableRow
from .phrases import cost_text, example_at, host_time_text, overlap_note, steps_text
from .rank_groups import FindingGroup, collapsed, group_findings, outcome_groups, rank_ranges, ranks_by_step

__all__ = ["render_text", "fmt_us"]

_SEV = {"high": "HIGH", "medium": "MED ", "low": "LOW ", "info": "INFO"}
# Titles, fixes and rule lists run to 300 characters: wrapped at this width with a hanging indent, so that each
# finding reads as a block in a terminal or a saved file (example lines are not wrapped: one event per line).
WIDTH = 110


def _wrap(text: str, indent: str, width: int) -> list[str]:
    """``text`` wrapped at ``width`` (never inside a word: kernel and option names stay whole), continuation
    lines indented by ``indent``."""
    if width <= 0 or len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False) or [
        text
    ]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _summary(r: RankSummary, width: int) -> list[str]:
    lines = [f"rank {r.rank}  {r.source}", f"  events {r.events:,}  span {fmt_us(r.span_us)}  window {r.window_text}"]
    if r.steps:
        s = r.steps
        lines += _wrap(
            f"  step time: mean {fmt_us(s.mean_us)}  median {fmt_us(s.median_us)}  min {fmt_us(s.min_us)}  "
            f"max {fmt_us(s.max_us)}  ({steps_text(s)})",
            " " * 4,
            width,
        )
    if r.breakdown:
        b = r.breakdown
        lines.append(
            f"  GPU ({fmt_us(b.span_us)} span{f', mean of {len(b.devices)} GPUs' if b.devices else ''}): "
            f"idle {_pct(b.share(b.idle_us))}  compute {_pct(b.share(b.compute_us))}"
            f"  non-compute {_pct(b.share(b.non_compute_us))};  communication kernels "
            f"{_pct(b.share(b.communication_us))}{_overlap(b)}, memory {_pct(b.share(b.memory_us))}"
        )
        for d in b.devices:  # a rank driving several GPUs: each one over the same span
            lines.append(
                f"    GPU {d.device}: idle {_pct(b.share(d.idle_us))}  compute {_pct(b.share(d.compute_us))}  "
                f"non-compute {_pct(b.share(d.non_compute_us))};  communication kernels "
                f"{_pct(b.share(d.communication_us))}, memory {_pct(b.share(d.memory_us))}"
            )
    else:
        lines.append("  CPU-only trace (no GPU activity): GPU rules not applicable")
        if r.host_time:  # the op table covers the ops only: say where the rest of the window went
            lines += _wrap(f"  {host_time_text(r.host_time)}", " " * 4, width)
    return lines


def _step_spread(ranks: tuple[RankSummary, ...]) -> str:
    """The ranks' mean step times side by side (two ranks or more with steps): the spread a straggler widens."""
    timed = sorted((r.steps.mean_us, r.rank) for r in ranks if r.steps)
    if len(timed) < 2:
        return ""
    median = statistics.median(m for m, _ in timed)
    (low, low_rank), (high, high_rank) = timed[0], timed[-1]
    spread = f", spread {100 * (high - low) / median:.1f}% of the median" if median > 0 else ""
    return (
        f"step time across {len(timed)} ranks: median {fmt_us(median)}, fastest {fmt_us(low)} (rank {low_rank}), "
        f"slowest {fmt_us(high)} (rank {high_rank}){spread}"
    )


def _finding(i: int, f: Finding, width: int) -> list[str]:
    e = f.evidence
    where = "all ranks" if f.rank is None else f"rank {f.rank}"
    cost = cost_text(e)
    if e.share is not None:
        cost += f" ({_pct(e.share)} of {e.share_of or 'window'})"
    lines = _wrap(f"{i:>2}. [{_SEV[f.severity.value]}] {f.rule_id} ({where}): {f.title}", " " * 6, width)
    lines += _wrap(f"      {cost}", " " * 8, width)
    if e.time_lost_basis and e.time_lost_us > 0:  # a zero says why instead (cost_text)
        lines += _wrap(f"      time lost = {e.time_lost_basis}", " " * 8, width)
    for ex in e.examples:
        lines.append(
            f"      e.g. {clip_name(ex.name, 80)} at {example_at(ex)} dur {fmt_us(ex.dur_us)} {ex.where}".rstrip()
        )
        if ex.note:  # under its example, e.g. what the host did during a GPU idle gap
            lines += _wrap(f"           {ex.note}", " " * 13, width)
    lines += _wrap(f"      fix: {f.fix}", " " * 11, width)
    return lines


def _overlap(b: Breakdown) -> str:
    """HTA's comm/comp overlap after the communication share, when there is communication."""
    return "" if b.comm_overlap_share is None else f" ({_pct(b.comm_overlap_share)} under compute)"


def _kernel_table(rows: tuple[TableRow, ...]) -> list[str]:
    if not rows:
        return []
    # share: of all kernel/copy time (a sum, not a union: not how busy the GPU was; that is the summary's idle %)
    lines = [
        "  top GPU kernels / copies by GPU time (share: of all GPU kernel/copy time)",
        f"    {'total':>10} {'share':>6} {'count':>7} {'type':<13} name",
    ]
    for r in rows:
        name = clip_name(r.name, 80)
        lines.append(f"    {fmt_us(r.total_us):>10} {_pct(r.share):>6} {r.count:>7} {(r.kind or '-'):<13} {name}")
    return lines


def _op_table(rows: tuple[TableRow, ...], share_of: str) -> list[str]:
    if not rows:
        return []
    of = (
        "self time of the window"
        if share_of == "window"
        else f"self time of all {share_of}, longer than the window: threads ran ops in parallel"
    )
    lines = [
        f"  top CPU ops by self time (share: {of})",
        f"    {'self':>10} {'total':>10} {'share':>6} {'count':>7}  name",
    ]
    for r in rows:
        self_us = fmt_us(r.self_us) if r.self_us is not None else "-"
        lines.append(
            f"    {self_us:>10} {fmt_us(r.total_us):>10} {_pct(r.share):>6} {r.count:>7}  {clip_name(r.name, 80)}"
        )
    return lines


def render_text(report: Report, *, show_clean: bool = False, width: int = WIDTH, all_ranks: bool = False) -> str:
    """The terminal report; long lines (titles, fixes, rule lists) wrapped at ``width`` (0: not wrapped). More
    than ``RANK_THRESHOLD`` ranks: the cross-rank view, unless ``all_ranks`` (a section per rank, as below it)."""
    if collapsed(report, all_ranks):
        return _cross_rank_text(report, show_clean, width)
    out = ["== dyno trace analysis ==", ""]
    for r in report.ranks:
        out += _summary(r, width)
    if spread := _step_spread(report.ranks):
        out += _wrap(spread, " " * 4, width)
    out += _findings_head(report, f"== findings ({len(report.findings)}), by severity, then time lost ==", width)
    for i, f in enumerate(report.findings, 1):
        out += _finding(i, f, width)
    out += _rules_not_run(report, show_clean, width, grouped=False)
    out += ["", "== tables =="]
    for r in report.ranks:
        out.append(f"rank {r.rank}")
        out += _tables(r)
    return "\n".join(out) + "\n"


def _findings_head(report: Report, heading: str, width: int) -> list[str]:
    """The files left out, then the findings' heading (and what applies to all of them)."""
    out = [f"skipped {e.path}: {e.reason}" for e in report.errors]  # a load error, or a file left out (cycles.py)
    out += ["", heading]
    if not report.findings:
        out.append("no antipattern found")
    if note := overlap_note(report.findings):
        out += _wrap(f"({note})", " ", width)
    return out


def _rules_not_run(report: Report, show_clean: bool, width: int, *, grouped: bool) -> list[str]:
    """The rules that could not run (``grouped``: once per rule, status and reason, with their ranks; else a line
    each), the ones not applicable, and with ``show_clean`` those without a finding."""
    other, not_applicable = report.rules_not_run()
    out = ["", "== rules that could not run =="] if other or not_applicable else []
    for g in outcome_groups(other, grouped=grouped):
        o = g.outcome
        where = f" (ranks {rank_ranges(g.ranks)})" if len(g.ranks) > 1 else "" if not g.ranks else f" (rank {o.rank})"
        hint = f"; enable with: {o.enable_with}" if o.enable_with else ""
        out += _wrap(f"  {o.rule_id}{where}: {o.status}: {o.reason}{hint}", " " * 4, width)
    if not_applicable:
        out += _wrap(f"  not applicable to these traces: {', '.join(not_applicable)}", " " * 4, width)
    if show_clean:
        clean = sorted({o.rule_id for o in report.rules if o.status == "clean"})
        out += _wrap(f"  no finding: {', '.join(clean)}", " " * 4, width)
    return out


def _tables(r: RankSummary) -> list[str]:
    return _kernel_table(r.top_kernels) + _op_table(r.top_cpu_ops, r.cpu_ops_share_of) or [
        "  no GPU kernels or CPU ops in the trace"
    ]


_SOURCE_COLUMN = 35  # the rank table's rows in WIDTH: the figures take 75 columns ("host:port:path" is cut at its end)


def _rank_row(r: RankSummary, n_findings: int) -> str:
    s, b = r.steps, r.breakdown
    mean, median, high = (fmt_us(s.mean_us), fmt_us(s.median_us), fmt_us(s.max_us)) if s else ("-", "-", "-")
    idle, compute = (_pct(b.share(b.idle_us)), _pct(b.share(b.compute_us))) if b else ("no GPU", "-")
    return (
        f"    {r.rank:>6} {mean:>10} {median:>10} {high:>10} {idle:>9} {compute:>9} {n_findings:>9}  "
        f"{clip_name(r.source, _SOURCE_COLUMN)}"
    )


def _rank_table(report: Report, counts: dict[int, int]) -> tuple[list[str], RankSummary]:
    """The slowest and fastest ranks by mean step, with their key figures and number of findings; and the table's
    first rank."""
    slowest, fastest = ranks_by_step(report.ranks)
    timed = sum(1 for r in report.ranks if r.steps)
    n = len(report.ranks)
    what = (
        f"the {len(slowest)} slowest and the {len(fastest)} fastest by mean step time"
        if timed
        else f"the first {len(slowest)} (no rank has step markers)"
    )
    lines = [
        f"ranks: {what}, of {n:,} (--all-ranks: a section per rank)",
        f"    {'rank':>6} {'mean step':>10} {'median':>10} {'max':>10} {'GPU idle':>9} {'compute':>9} "
        f"{'findings':>9}  source",
    ]
    lines += [_rank_row(r, counts.get(r.rank, 0)) for r in slowest]
    if fastest:
        lines.append(f"    {'...':>6}")
        lines += [_rank_row(r, counts.get(r.rank, 0)) for r in fastest]
    if 0 < timed < n:
        lines.append(f"    ({n - timed:,} ranks without step markers are not ordered)")
    return lines, slowest[0]


def _group(i: int, g: FindingGroup, width: int) -> list[str]:
    f = g.example
    lines = _wrap(f"{i:>2}. [{_SEV[f.severity.value]}] {g.headline()}: {f.title}", " " * 6, width)
    if len(g.ranks) < g.of_ranks:
        lines += _wrap(f"      ranks {rank_ranges(g.ranks)}", " " * 8, width)
    lines += _wrap(f"      fix: {f.fix}", " " * 11, width)
    return lines


def _cross_rank_text(report: Report, show_clean: bool, width: int) -> str:
    """The cross-rank view of a report of many ranks (``render_text``)."""
    counts: dict[int, int] = {}
    for f in report.findings:
        if f.rank is not None:
            counts[f.rank] = counts.get(f.rank, 0) + 1
    out = ["== dyno trace analysis ==", ""]
    if spread := _step_spread(report.ranks):
        out += _wrap(spread, " " * 4, width)
    table, slowest = _rank_table(report, counts)
    out += table
    if counts:
        out += _wrap(
            f"ranks with findings: {len(counts):,} of {len(report.ranks):,}: {rank_ranges(counts)}", "    ", width
        )
    out.append("the first rank of the table, in full:")
    out += _summary(slowest, width)
    heading = f"== findings ({len(report.findings):,}), by severity, then time lost; a rule's on many ranks as one =="
    out += _findings_head(report, heading, width)
    for i, item in enumerate(group_findings(report), 1):
        out += _group(i, item, width) if isinstance(item, FindingGroup) else _finding(i, item, width)
    out += _rules_not_run(report, show_clean, width, grouped=True)
    out += ["", "== tables ==", f"rank {slowest.rank} (the first of the rank table; --all-ranks: every rank's)"]
    out += _tables(slowest)
    return "\n".join(out) + "\n"

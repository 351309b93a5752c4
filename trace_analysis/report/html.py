"""Standalone HTML report: one file, inline CSS and SVG plots, no scripts, no network.

Plots: GPU time breakdown bars per rank, per-rank step times, GPU-utilization timeline per rank/device.

Past ``rank_groups.RANK_THRESHOLD`` ranks (unless ``all_ranks``), as the text report: the summary rows, bars,
timelines and tables of the slowest and fastest ranks only (the step chart keeps every rank's mean), and a rule's
findings on many ranks, or a rule that could not run on many, as one entry.
"""

from __future__ import annotations

from html import escape

from msgspec.structs import replace

from ..rules.base import Finding
from ..units import clip_name, fmt_count, fmt_ts, fmt_us
from .model import SCHEMA, SCHEMA_VERSION, Breakdown, DeviceBreakdown, RankSummary, Report, TableRow
from .phrases import cost_text, example_at, host_time_text, overlap_note
from .rank_groups import FindingGroup, collapsed, group_findings, outcome_groups, rank_ranges, ranks_by_step

__all__ = ["render_html"]

_COLORS = {
    "compute": "#2e7d32",
    "communication not under compute": "#1565c0",
    "other non-compute": "#f9a825",
    "idle": "#bdbdbd",
}
MAX_TIMELINES = 16
_SEV_COLORS = {"high": "#c62828", "medium": "#ef6c00", "low": "#f9a825", "info": "#607d8b"}
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#212121;max-width:1100px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px;margin:8px 0}td,th{padding:3px 8px;border-bottom:1px solid #eee;
text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.sev{display:inline-block;color:#fff;border-radius:3px;padding:0 6px;font-size:12px;font-weight:600}
.finding{border-left:4px solid #ccc;padding:6px 12px;margin:10px 0;background:#fafafa}
.fix{color:#1b5e20}.muted{color:#757575;font-size:13px}code{font-size:12px}
svg text{font-size:11px;fill:#424242}
"""


def _device_fields(d: DeviceBreakdown) -> dict[str, float]:
    return {
        "idle_us": d.idle_us,
        "compute_us": d.compute_us,
        "non_compute_us": d.non_compute_us,
        "communication_us": d.communication_us,
        "memory_us": d.memory_us,
        "exposed_communication_us": d.exposed_communication_us,
    }


def _bar_breakdown(ranks: list[RankSummary]) -> str:
    rows: list[tuple[str, Breakdown]] = []
    for r in ranks:
        if r.breakdown is None:
            continue
        rows.append((f"rank {r.rank}", r.breakdown))
        # a rank driving several GPUs: its bar is their mean, one more bar per GPU over the same span
        rows += [
            (f"  GPU {d.device}", replace(r.breakdown, devices=(), **_device_fields(d))) for d in r.breakdown.devices
        ]
    if not rows:
        return "<p class=muted>No GPU activity: no GPU breakdown.</p>"
    w, row_h, left = 760, 26, 70
    h = row_h * len(rows) + 40
    parts = [f'<svg width="{w}" height="{h}" role="img" aria-label="GPU time breakdown">']
    for i, (name, b) in enumerate(rows):
        # communication under compute is compute time already: the bar shows the rest (segments add up to the
        # span; with the whole communication time they ran past it when the two overlap)
        comm = min(b.exposed_communication_us, b.non_compute_us)
        segs = [
            ("compute", b.compute_us),
            ("communication not under compute", comm),
            ("other non-compute", max(b.non_compute_us - comm, 0.0)),
            ("idle", b.idle_us),
        ]
        x, y = float(left), 10 + i * row_h
        parts.append(f'<text x="0" y="{y + 15}">{escape(name)}</text>')
        for label, v in segs:
            seg_w = (w - left - 10) * b.share(v)
            if seg_w <= 0:
                continue
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{seg_w:.1f}" height="20" fill="{_COLORS[label]}">'
                f"<title>{escape(label)}: {fmt_us(v)} ({100 * b.share(v):.1f}%)</title></rect>"
            )
            x += seg_w
    y = 10 + len(rows) * row_h + 12
    x = left
    for label, color in _COLORS.items():
        parts.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{x + 14}" y="{y}">{escape(label)}</text>')
        x += 16 + 7 * len(label) + 20
    parts.append("</svg>")
    return "".join(parts)


_PALETTE = ("#1565c0", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f", "#ad1457", "#5d4037", "#455a64")
_STEP_W, _STEP_H, _STEP_LEFT, _STEP_BOTTOM = 760, 220, 60, 30


def _step_axes(vmax: float) -> list[str]:
    w, h, left, bottom = _STEP_W, _STEP_H, _STEP_LEFT, _STEP_BOTTOM
    return [
        f'<svg width="{w}" height="{h}" role="img" aria-label="step time per rank">',
        f'<line x1="{left}" y1="{h - bottom}" x2="{w - 10}" y2="{h - bottom}" stroke="#999"/>',
        f'<text x="0" y="14">{escape(fmt_us(vmax))}</text><text x="0" y="{h - bottom}">0</text>',
    ]


def _step_chart(ranks: list[RankSummary]) -> str:
    with_steps = [r for r in ranks if r.steps]
    if not with_steps:
        return "<p class=muted>No ProfilerStep markers: no per-step times.</p>"
    if len(with_steps) > len(_PALETTE):
        return _mean_step_chart(with_steps)
    w, h, left, bottom = _STEP_W, _STEP_H, _STEP_LEFT, _STEP_BOTTOM
    n_steps = max(len(r.steps.durations_us) for r in with_steps if r.steps)
    vmax = max(max(r.steps.durations_us) for r in with_steps if r.steps) or 1.0
    group_w = (w - left - 10) / max(n_steps, 1)
    bar_w = max(group_w / (len(with_steps) + 1), 1.0)
    parts = _step_axes(vmax)
    for j, r in enumerate(with_steps):
        assert r.steps is not None
        color = _PALETTE[j]
        for i, d in enumerate(r.steps.durations_us):
            bh = (h - bottom - 10) * d / vmax
            x = left + i * group_w + j * bar_w
            parts.append(
                f'<rect x="{x:.1f}" y="{h - bottom - bh:.1f}" width="{bar_w * 0.9:.1f}" height="{bh:.1f}" '
                f'fill="{color}"><title>rank {r.rank} step {i}: {fmt_us(d)}</title></rect>'
            )
        parts.append(f'<rect x="{left + j * 80}" y="{h - 14}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{left + j * 80 + 14}" y="{h - 5}">rank {r.rank}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _mean_step_chart(ranks: list[RankSummary]) -> str:
    """More ranks than colours: one bar per rank, its mean step time (per-step bars in repeating colours would
    not tell ranks apart, and neither they nor a legend entry per rank fit in the plot)."""
    w, h, left, bottom = _STEP_W, _STEP_H, _STEP_LEFT, _STEP_BOTTOM
    means = [r.steps.mean_us if r.steps else 0.0 for r in ranks]
    vmax = max(means) or 1.0
    bar_w = (w - left - 10) / len(ranks)
    parts = _step_axes(vmax)
    for j, (r, mean) in enumerate(zip(ranks, means, strict=True)):
        assert r.steps is not None
        s = r.steps
        bh = (h - bottom - 10) * mean / vmax
        parts.append(
            f'<rect x="{left + j * bar_w:.2f}" y="{h - bottom - bh:.1f}" width="{bar_w * 0.9:.2f}" height="{bh:.1f}" '
            f'fill="{_PALETTE[0]}"><title>rank {r.rank}: mean {fmt_us(mean)} over {s.count} steps '
            f"(min {fmt_us(s.min_us)}, max {fmt_us(s.max_us)})</title></rect>"
        )
    first, last = ranks[0].rank, ranks[-1].rank
    parts.append(f'<text x="{left}" y="{h - 5}">mean step time of ranks {first} to {last}, left to right</text>')
    parts.append("</svg>")
    return "".join(parts)


def _timeline(ranks: list[RankSummary]) -> str:
    lines = [(r.rank, t) for r in ranks for t in r.timelines]
    if not lines:
        return "<p class=muted>No GPU activity: no utilization timeline.</p>"
    more = len(lines) - MAX_TIMELINES
    lines = lines[:MAX_TIMELINES]  # a 128-rank job would otherwise draw a 9000 px column
    w, row_h, left = 760, 70, 116  # left: the rank/GPU label (~80 px at 11 px), then the 0-100% scale
    parts = [f'<svg width="{w}" height="{row_h * len(lines) + 10}" role="img" aria-label="GPU utilization">']
    for k, (rank, t) in enumerate(lines):
        y0 = 10 + k * row_h
        hgt = row_h - 20
        n = len(t.utilization)
        step = (w - left - 10) / max(n, 1)
        pts = [f"{left:.1f},{y0 + hgt:.1f}"]
        for i, u in enumerate(t.utilization):
            pts.append(f"{left + i * step:.1f},{y0 + hgt * (1 - u):.1f}")
            pts.append(f"{left + (i + 1) * step:.1f},{y0 + hgt * (1 - u):.1f}")
        pts.append(f"{left + n * step:.1f},{y0 + hgt:.1f}")
        span = t.edges_us[-1] - t.edges_us[0] if t.edges_us else 0.0
        parts.append(f'<text x="0" y="{y0 + 14}">rank {rank} GPU {t.device}</text>')
        parts.append(f'<text x="0" y="{y0 + 28}">over {escape(fmt_us(span))}</text>')
        # the scale: the band's top is 100% busy (a lone polygon does not say so)
        parts.append(f'<text x="{left - 30}" y="{y0 + 9}">100%</text><text x="{left - 18}" y="{y0 + hgt}">0%</text>')
        parts.append(f'<rect x="{left}" y="{y0}" width="{w - left - 10}" height="{hgt}" fill="#f5f5f5"/>')
        parts.append(f'<polygon points="{" ".join(pts)}" fill="#66bb6a" stroke="#2e7d32" stroke-width="1"/>')
        mean = sum(t.utilization) / n if n else 0.0
        parts.append(f'<text x="{w - 120}" y="{y0 + hgt + 12}">mean {100 * mean:.0f}% busy</text>')
    parts.append("</svg>")
    if more > 0:
        parts.append(f"<p class=muted>{more} more rank/device timelines in the JSON report.</p>")
    return "".join(parts)


def _table(rows: tuple[TableRow, ...], share_label: str) -> str:
    if not rows:
        return ""
    with_self = any(r.self_us is not None for r in rows)
    head = "<tr>" + ("<th>self</th>" if with_self else "") + f"<th>total</th><th>{share_label}</th><th>count</th>"
    head += "<th>type</th><th>name</th><th>longest at ts (µs)</th></tr>"
    body = "".join(
        "<tr>"
        + (f"<td class=n>{fmt_us(r.self_us or 0.0)}</td>" if with_self else "")
        + f"<td class=n>{fmt_us(r.total_us)}</td><td class=n>{100 * r.share:.1f}%</td><td class=n>{r.count}</td>"
        f"<td>{escape(r.kind or '')}</td><td><code>{escape(clip_name(r.name, 160))}</code></td>"
        f"<td class=n>{'' if r.example_ts_us is None else fmt_ts(r.example_ts_us)}</td></tr>"
        for r in rows
    )
    return f"<table>{head}{body}</table>"


MAX_COUNTS = 12  # the cross-rank view: a finding's counts shown (the straggler's has two per rank of the job)


def _finding_html(f: Finding, group: FindingGroup | None = None, max_counts: int | None = None) -> str:
    ev = f.evidence
    sev = f.severity.value
    cost = escape(cost_text(ev))
    if ev.share is not None:
        cost += f" ({100 * ev.share:.1f}% of {escape(ev.share_of or 'window')})"
    if ev.time_lost_basis and ev.time_lost_us > 0:  # a zero says why instead (cost_text)
        cost += f"; time lost = {escape(ev.time_lost_basis)}"
    examples = "".join(
        f"<li><code>{escape(clip_name(x.name, 160))}</code> at {escape(example_at(x))}, {fmt_us(x.dur_us)} "
        f"{escape(x.where)}{f'<br><span class=muted>{escape(x.note)}</span>' if x.note else ''}</li>"
        for x in ev.examples
    )
    items = list(ev.counts.items())
    counts = ", ".join(escape(fmt_count(k, v)) for k, v in items[:max_counts])
    if max_counts is not None and len(items) > max_counts:
        counts += f" and {len(items) - max_counts:,} more (in the JSON report)"
    where = "all ranks" if f.rank is None else f"rank {f.rank}"
    head = f"<b>{escape(f.rule_id)}</b> ({where}): {escape(f.title)}"
    if group is not None:  # the rule on many ranks: how many and their losses, then its first finding
        some = "" if len(group.ranks) == group.of_ranks else f" (ranks {escape(rank_ranges(group.ranks))})"
        head = f"<b>{escape(group.headline())}</b>{some}<br>e.g. {head}"
    return (
        f'<div class=finding style="border-color:{_SEV_COLORS[sev]}">'
        f'<span class=sev style="background:{_SEV_COLORS[sev]}">{sev}</span> '
        f"{head}<br><span class=muted>{cost}; {counts}</span>"
        f"{f'<ul>{examples}</ul>' if examples else ''}<div class=fix>Fix: {escape(f.fix)}</div></div>"
    )


def render_html(report: Report, title: str = "dyno trace analysis", *, all_ranks: bool = False) -> str:
    """The HTML report; more than ``RANK_THRESHOLD`` ranks: the cross-rank view, unless ``all_ranks``."""
    few = collapsed(report, all_ranks)
    ranks = list(report.ranks)
    if few:
        slowest, fastest = ranks_by_step(report.ranks)
        ranks = slowest + fastest
    out = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f"<p class=muted>{escape(', '.join(report.sources))} — schema {escape(SCHEMA)} v{SCHEMA_VERSION}</p>",
        "<h2>Summary</h2><table><tr><th>rank</th><th>events</th><th>span</th><th>window</th><th>mean step</th>"
        "<th>GPU idle</th><th>GPU compute</th></tr>",
    ]
    for r in ranks:
        b = r.breakdown
        out.append(
            f"<tr><td>{r.rank}</td><td class=n>{r.events:,}</td><td class=n>{fmt_us(r.span_us)}</td>"
            f"<td>{escape(r.window_text)}</td><td class=n>{fmt_us(r.steps.mean_us) if r.steps else '-'}</td>"
            f"<td class=n>{f'{100 * b.share(b.idle_us):.1f}%' if b else 'no GPU'}</td>"
            f"<td class=n>{f'{100 * b.share(b.compute_us):.1f}%' if b else '-'}</td></tr>"
        )
    out.append("</table>")
    if few:
        out.append(
            f"<p class=muted>The {len(ranks)} slowest and fastest of {len(report.ranks):,} ranks by mean step time "
            "(every rank's figures are in the JSON report; --all-ranks: every rank here).</p>"
        )
    for r in ranks:  # CPU-only: the op table covers the ops only, so say where the rest of the window went
        if r.host_time and not r.breakdown:
            out.append(f"<p class=muted>rank {r.rank}: {escape(host_time_text(r.host_time))}.</p>")
    for e in report.errors:
        out.append(f"<p class=muted>skipped {escape(e.path)}: {escape(e.reason)}</p>")
    out += ["<h2>GPU time breakdown</h2>", _bar_breakdown(ranks)]
    out += ["<h2>Step time per rank</h2>", _step_chart(list(report.ranks))]
    out += ["<h2>GPU utilization over time</h2>", _timeline(ranks)]
    out.append(f"<h2>Findings ({len(report.findings)}), by severity, then time lost</h2>")
    if not report.findings:
        out.append("<p>No antipattern found.</p>")
    if note := overlap_note(report.findings):
        out.append(f"<p class=muted>{escape(note[0].upper() + note[1:])}.</p>")
    cap = MAX_COUNTS if few else None
    for item in group_findings(report) if few else report.findings:
        if isinstance(item, FindingGroup):
            out.append(_finding_html(item.example, item, cap))
        else:
            out.append(_finding_html(item, None, cap))
    # as the text report: a row per rule and rank only for those that miss data or failed (a 300-rank CPU-only
    # job listed 4,200 "not applicable" rows)
    skipped, not_applicable = report.rules_not_run()
    if skipped or not_applicable:
        out.append("<h2>Rules that did not run</h2>")
    if skipped:
        out.append("<table><tr><th>rule</th><th>rank</th><th>why</th><th>enable with</th></tr>")
        for g in outcome_groups(skipped, grouped=few):
            o = g.outcome
            out.append(
                f"<tr><td>{escape(o.rule_id)}</td><td>{escape(rank_ranges(g.ranks))}</td>"
                f"<td>{escape(o.reason)}</td><td>{escape(o.enable_with or '')}</td></tr>"
            )
        out.append("</table>")
    if not_applicable:
        out.append(f"<p class=muted>Not applicable to these traces: {escape(', '.join(not_applicable))}</p>")
    out.append("<h2>Tables</h2>")
    if few:
        out.append("<p class=muted>The slowest rank's (--all-ranks: every rank's).</p>")
    for r in ranks[:1] if few else ranks:
        out.append(f"<h3>rank {r.rank}</h3>")
        if r.top_kernels:
            out.append("<p>Top GPU kernels / copies by GPU time</p>" + _table(r.top_kernels, "of GPU work"))
        out.append("<p>Top CPU ops by self time</p>" + _table(r.top_cpu_ops, "self / " + r.cpu_ops_share_of))
    out.append("</body></html>")
    return "\n".join(out) + "\n"

"""`dyno-cli opportunities --html FILE`: one offline page (inline CSS and SVG, nothing fetched) with a ranked
horizontal bar chart of the recoverable GPU-hours per rule, each rule's fix and top jobs, and the jobs never
analysed. Every text from the daemons (job ids, users, hosts, fixes, reasons) is HTML-escaped."""

from __future__ import annotations

import time
from html import escape

from dyno.client.opportunities.model import Opportunities, RuleOpportunity, Unanalysed
from dyno.client.opportunities.text import count_words, period_words
from dyno.client.opportunities.text import gpu_hours_words as _h

__all__ = ["render_html"]

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;max-width:70em}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .7em;border-bottom:1px solid #ddd;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.fix{background:#f4f7fb;padding:.5em .8em;border-left:3px solid #4a78b5}
.muted{color:#666}svg text{font:12px system-ui,sans-serif}
"""
_BAR_H, _GAP, _LABEL_W, _BAR_W = 22, 6, 200, 480
_LABEL_CHARS = 28  # a rule id longer than this is cut in the chart's label (its tooltip and section keep it whole)


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _label(rule: str) -> str:
    return rule if len(rule) <= _LABEL_CHARS else rule[: _LABEL_CHARS - 1] + "…"


def _chart(o: Opportunities) -> str:
    """One bar per rule, in ranked order, lengths relative to the first."""
    top = max((r.recoverable_gpu_hours for r in o.rules), default=0.0) or 1.0
    height = len(o.rules) * (_BAR_H + _GAP) + _GAP
    parts = [
        f'<svg role="img" aria-label="recoverable GPU-hours per rule" '
        f'width="{_LABEL_W + _BAR_W + 120}" height="{height}">'
    ]
    for i, r in enumerate(o.rules):
        y = _GAP + i * (_BAR_H + _GAP)
        w = max(1.0, _BAR_W * r.recoverable_gpu_hours / top)
        parts.append(
            f'<g class="bar" data-rule="{_e(r.rule)}"><title>{_e(r.rule)}: {_h(r.recoverable_gpu_hours)} GPU-hours'
            f"</title>"
            f'<text x="{_LABEL_W - 6}" y="{y + _BAR_H * 0.7:.1f}" text-anchor="end">{_e(_label(r.rule))}</text>'
            f'<rect x="{_LABEL_W}" y="{y}" width="{w:.1f}" height="{_BAR_H}" fill="#4a78b5"/>'
            f'<text x="{_LABEL_W + w + 6:.1f}" y="{y + _BAR_H * 0.7:.1f}">{_h(r.recoverable_gpu_hours)}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _rule(i: int, r: RuleOpportunity) -> str:
    rows = "".join(
        f"<tr><td>{_e(j.job_id)}</td><td>{_e(j.user)}</td><td class=n>{_h(j.gpu_hours)}</td>"
        f"<td class=n>{100 * j.share:.1f}%</td><td class=n>{_h(j.recoverable_gpu_hours)}</td>"
        f"<td>{_e(', '.join(j.hosts))}</td></tr>"
        for j in r.jobs
    )
    more = f'<p class="muted">and {r.job_count - len(r.jobs)} more jobs</p>' if r.job_count > len(r.jobs) else ""
    return (
        f'<section class="rule" id="rule-{i}"><h2>{i}. {_e(r.rule)}: {_h(r.recoverable_gpu_hours)} GPU-hours '
        f"recoverable</h2><p>{_e(r.title)} — {count_words(r.job_count, 'job')} of {count_words(r.user_count, 'user')} "
        f"on {count_words(r.host_count, 'host')}</p>"
        + (f'<p class="fix">Fix: {_e(r.fix)}</p>' if r.fix else "")
        + "<table><tr><th>Job</th><th>User</th><th>GPU-hours</th><th>Share</th><th>Recoverable</th><th>Hosts</th>"
        f"</tr>{rows}</table>{more}</section>"
    )


def _failures(u: Unanalysed) -> str:
    return "; ".join(f"{host}: {reason}" for host, reason in u.failures) or "no analysis"


def _never(o: Opportunities) -> str:
    rows = "".join(
        f"<tr><td>{_e(u.job_id)}</td><td>{_e(u.user)}</td><td class=n>{_h(u.gpu_hours)}</td>"
        f"<td>{_e(', '.join(u.hosts))}</td><td>{_e(_failures(u))}</td></tr>"
        for u in o.unanalysed
    )
    more = o.unanalysed_job_count - len(o.unanalysed)
    return (
        f'<section id="never"><h2>Never analysed: {_h(o.never_analysed_gpu_hours)} GPU-hours of '
        f"{o.unanalysed_job_count} jobs</h2><p>Unknown loss, not zero: no finished analysis on these hosts "
        f"({o.failed_analysis_count} analyses failed).</p>"
        "<table><tr><th>Job</th><th>User</th><th>GPU-hours</th><th>Hosts</th><th>Why</th></tr>"
        f"{rows}</table>" + (f'<p class="muted">and {more} more jobs</p>' if more > 0 else "") + "</section>"
    )


def render_html(o: Opportunities, now_s: float | None = None) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(time.time() if now_s is None else now_s))
    failed = "".join(f"<li>{_e(host)}: {_e(error)}</li>" for host, error in o.failed_hosts)
    body = [
        "<h1>The fleet's opportunities</h1>",
        f'<p class="muted">{_e(o.source)}, the last {period_words(o.since_s)}, made {when}</p>',
        f"<p>{_h(o.total_gpu_hours)} GPU-hours of {count_words(o.job_count, 'job')} "
        f"({count_words(o.user_count, 'user')}, {count_words(o.host_count, 'host')}): "
        f"{_h(o.analysed_gpu_hours)} analysed, {_h(o.never_analysed_gpu_hours)} never analysed.</p>",
        f"<p><strong>Hosts that did not answer</strong> (their jobs are missing):</p><ul>{failed}</ul>"
        if failed
        else "",
        _chart(o) if o.rules else "<p>No antipattern costs time in the analysed jobs' latest analyses.</p>",
        *(_rule(i, r) for i, r in enumerate(o.rules, 1)),
        _never(o) if o.unanalysed else "",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>dyno: the fleet's opportunities</title>"
        f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n"
    )

"""`dyno-cli opportunities`' terminal table: the ranking, then each rule's fix and top jobs, then the jobs never
analysed. Lines fit `max_width` (a terminal's; 100 columns of prose into a pipe); job ids, users and host names are
a daemon's text: control characters become '?' and long ones are cut."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

from dyno.client.format import table
from dyno.client.opportunities.model import Opportunities, RuleOpportunity, Unanalysed

__all__ = ["count_words", "gpu_hours_words", "period_words", "render"]

_NAME = 40  # a job id, user or host is cut to at most this many characters here (--json and --html keep them whole)
_PROSE = 100
_HOSTS = 3  # host names listed per job, then "+N"


def _clean(text: str, most: int = _NAME) -> str:
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= most else text[: most - 3] + "..."


def _hosts(hosts: Iterable[str], cap: int) -> str:
    names = [_clean(h, cap) for h in hosts]
    listed = ",".join(names[:_HOSTS]) + (f" +{len(names) - _HOSTS}" if len(names) > _HOSTS else "")
    return _clean(listed, 2 * cap)


def _cap(max_width: int | None) -> int:
    """How long a name may be in a table of `max_width` columns: the tables' other columns take about 56."""
    return _NAME if max_width is None else max(8, min(_NAME, (max_width - 56) // 2))


def period_words(seconds: float) -> str:
    """--since in words: "7 days", "1 hour", "30 minutes"."""
    units = ((86400, "day"), (3600, "hour"), (60, "minute"), (1, "second"))
    size, unit = next((u for u in units if seconds >= u[0]), units[-1])
    value = seconds / size
    return f"{value:g} {unit}" + ("" if value == 1 else "s")


def gpu_hours_words(hours: float) -> str:
    """GPU-hours with 2 decimals; under 0.1 with 4 (a short job's, a demo's), so that they do not read as 0."""
    if hours == 0 or hours >= 0.1:
        return f"{hours:.2f}"
    return f"{hours:.4f}" if hours >= 0.0001 else "<0.0001"


def count_words(count: int, word: str) -> str:
    """ "1 job", "2 jobs"."""
    return f"{count} {word}" + ("" if count == 1 else "s")


_n = count_words
_h = gpu_hours_words


def _pct(x: float) -> str:
    return f"{100.0 * x:.1f}%"


def render(o: Opportunities, max_width: int | None = None) -> str:
    prose = min(_PROSE, max_width) if max_width else _PROSE
    cap = _cap(max_width)
    lines = [
        textwrap.fill(
            f"{_h(o.total_gpu_hours)} GPU-hours in the last {period_words(o.since_s)} ({_n(o.job_count, 'job')} of "
            f"{_n(o.user_count, 'user')} on {_n(o.host_count, 'host')}): {_h(o.analysed_gpu_hours)} analysed, "
            f"{_h(o.never_analysed_gpu_hours)} never analysed (unknown loss, not zero).",
            prose,
        )
    ]
    if o.rules:
        lines += ["", _ranking(o, cap, max_width)]
        for i, r in enumerate(o.rules, 1):
            lines += ["", *_rule(i, r, prose, cap, max_width)]
    elif o.analysed_gpu_hours > 0:
        lines += ["", "No antipattern costs time in the analysed jobs' latest analyses."]
    if o.unanalysed:
        lines += ["", *_never(o, prose, cap, max_width)]
    return "\n".join(lines)


def _ranking(o: Opportunities, cap: int, max_width: int | None) -> str:
    analysed = o.analysed_gpu_hours
    rows = [
        [i, _clean(r.rule, max(cap, 24)), _h(r.recoverable_gpu_hours), _pct(r.recoverable_gpu_hours / analysed),
         r.job_count, r.user_count, r.title]
        for i, r in enumerate(o.rules, 1)
    ]  # fmt: skip
    headers = ["RANK", "RULE", "GPU-HOURS", "OF ANALYSED", "JOBS", "USERS", "TITLE"]
    return table(headers, rows, text=["RULE", "TITLE"], max_width=max_width)


def _rule(i: int, r: RuleOpportunity, prose: int, cap: int, max_width: int | None) -> list[str]:
    head = (
        f"{i}. {_clean(r.rule, 200)}: {_h(r.recoverable_gpu_hours)} GPU-hours recoverable, {_n(r.job_count, 'job')} of "
        f"{_n(r.user_count, 'user')} on {_n(r.host_count, 'host')}"
    )
    out = [textwrap.fill(head, prose, subsequent_indent="   ")]
    if r.fix:
        out.append(textwrap.fill("fix: " + _clean(r.fix, 2000), prose, initial_indent="   ", subsequent_indent="   "))
    rows = [
        [_clean(j.job_id, cap), _clean(j.user, cap), _h(j.gpu_hours), _pct(j.share),
         _h(j.recoverable_gpu_hours), _hosts(j.hosts, cap)]
        for j in r.jobs
    ]  # fmt: skip
    headers = ["JOB", "USER", "GPU-HOURS", "SHARE", "RECOVERABLE", "HOSTS"]
    width = max_width - 3 if max_width else None
    out += ["   " + line for line in table(headers, rows, text=["JOB", "USER", "HOSTS"], max_width=width).splitlines()]
    if r.job_count > len(r.jobs):
        out.append(f"   ... and {r.job_count - len(r.jobs)} more jobs (--top)")
    return out


def _never(o: Opportunities, prose: int, cap: int, max_width: int | None) -> list[str]:
    head = (
        f"Never analysed: {_h(o.never_analysed_gpu_hours)} GPU-hours of {_n(o.unanalysed_job_count, 'job')} (no "
        f"finished analysis on those hosts; {o.failed_analysis_count} failed)"
    )
    rows = [
        [_clean(u.job_id, cap), _clean(u.user, cap), _h(u.gpu_hours), _hosts(u.hosts, cap), _why(u)]
        for u in o.unanalysed
    ]
    headers = ["JOB", "USER", "GPU-HOURS", "HOSTS", "WHY"]
    out = [textwrap.fill(head, prose), table(headers, rows, text=["JOB", "USER", "HOSTS", "WHY"], max_width=max_width)]
    if o.unanalysed_job_count > len(o.unanalysed):
        out.append(f"... and {o.unanalysed_job_count - len(o.unanalysed)} more jobs (--top)")
    return out


def _why(u: Unanalysed) -> str:
    if not u.failures:
        return "no analysis"
    host, reason = u.failures[0]
    more = f" (+{len(u.failures) - 1} hosts)" if len(u.failures) > 1 else ""
    return _clean(f"analysis failed on {host}: {reason}", 200) + more

"""ListJobs' columnar page (dyno.v1.JobColumns) built from JobRecord messages: by dynod for a columnar request, and
by `dyno-cli jobs` and `dyno-cli opportunities` for a host that answered records (a dynod older than the columnar
form), so that one join (dyno.client.jobs_columns, dyno.client.opportunities.columns) reads both. With
`analysis_rules` (what opportunities asks for) the page also holds every rule of each latest analysis and its failure
message (JobColumns.analyses).

A page holds at most MAX_ROWS records and about MAX_BYTES: `fitting` says how many records make a page, fewer when
their strings would make it larger (the caller pages on from the last record it took), so an answer stays well
under gRPC's 4 MiB default message size.
"""

from __future__ import annotations

from collections.abc import Sequence

from dyno.v1 import dyno_pb2

__all__ = ["MAX_BYTES", "MAX_ROWS", "fitting", "job_columns", "top_rule"]

MAX_ROWS = 10_000
MAX_BYTES = 2 << 20
# a record's most bytes in the page besides its job id and user: 11 varints of at most 10 bytes, 5 doubles, 2 bools,
# the strings' lengths (the user counted as if every record had its own; the page's hostnames and rule ids: a few)
_ROW_BYTES = 11 * 10 + 5 * 8 + 2 + 4
# with analysis_rules: an analysis' 2 varints; a rule's 3 varints and a double; a string of the page's tables: its
# length and tag (counted once a page)
_ANALYSIS_BYTES = 2 * 5
_RULE_BYTES = 3 * 5 + 8
_STRING_BYTES = 6


def top_rule(s: dyno_pb2.TraceSummary) -> dyno_pb2.RuleLoss | None:
    """A finished analysis' costliest rule: the greatest time_lost_share, the first of equal ones; None: no rules."""
    return max(s.rules, key=lambda r: r.time_lost_share) if s.rules else None


def fitting(
    records: Sequence[dyno_pb2.JobRecord],
    max_bytes: int | None = None,
    max_rows: int = MAX_ROWS,
    *,
    analysis_rules: bool = False,
) -> int:
    """How many of the first records make one page (of job_columns with the same `analysis_rules`): at most
    `max_rows`, at least one (when there is one), fewer than given when the page would pass `max_bytes` (None:
    MAX_BYTES, read at the call)."""
    max_bytes = MAX_BYTES if max_bytes is None else max_bytes
    take, size = 0, 0
    seen: tuple[set[str], ...] = (set(), set(), set(), set())  # the page's failure messages, rule ids, titles, fixes
    for r in records[:max_rows]:
        size += _ROW_BYTES + len(r.job_id.encode()) + len(r.user.encode())
        if analysis_rules and r.HasField("latest_analysis"):
            size += _analysis_bytes(r.latest_analysis, *seen)
        if take and size > max_bytes:
            break
        take += 1
    return take


def _analysis_bytes(
    s: dyno_pb2.TraceSummary, messages: set[str], ids: set[str], titles: set[str], fixes: set[str]
) -> int:
    """An analysis' most bytes in AnalysisColumns: its entries, and its strings that the page's tables (the sets,
    added to) do not hold yet."""
    size = _ANALYSIS_BYTES + _RULE_BYTES * len(s.rules) + _new(messages, s.failure_message)
    for x in s.rules:
        size += _new(ids, x.rule) + _new(titles, x.title) + _new(fixes, x.fix)
    return size


def _new(table: set[str], text: str) -> int:
    if text in table:
        return 0
    table.add(text)
    return _STRING_BYTES + len(text.encode())


def job_columns(rows: Sequence[dyno_pb2.JobRecord], *, analysis_rules: bool = False) -> dyno_pb2.JobColumns:
    """All of `rows` as columns (the caller bounds a page with `fitting`); with `analysis_rules`, `analyses` too."""
    c = dyno_pb2.JobColumns(
        job_id=[r.job_id for r in rows],
        first_seen_ms=[r.first_seen_ms for r in rows],
        last_seen_ms=[r.last_seen_ms for r in rows],
        running=[r.running for r in rows],
        gpus_max=[r.gpus_max for r in rows],
        gpu_seconds=[r.gpu_seconds for r in rows],
        busy_gpu_seconds=[r.busy_gpu_seconds for r in rows],
        traces=[r.traces for r in rows],
        simulated=[r.simulated for r in rows],
    )
    users: dict[str, int] = {}
    c.user_index.extend([users.setdefault(r.user, len(users)) for r in rows])
    c.users.extend(users)
    hostnames: dict[str, int] = {}
    c.hostname_index.extend([hostnames.setdefault(r.hostname, len(hostnames)) for r in rows])
    c.hostnames.extend(hostnames)
    c.gpm_rows.extend([i for i, r in enumerate(rows) if r.sm_active_gpu_seconds or r.gpm_gpu_seconds])
    c.sm_active_gpu_seconds.extend([rows[i].sm_active_gpu_seconds for i in c.gpm_rows])
    c.gpm_gpu_seconds.extend([rows[i].gpm_gpu_seconds for i in c.gpm_rows])
    c.analysed_rows.extend([i for i, r in enumerate(rows) if r.HasField("latest_analysis")])
    rules: dict[str, int] = {}
    for i in c.analysed_rows:
        s = rows[i].latest_analysis
        c.analyzed_ms.append(s.analyzed_ms)
        c.analysis_trace_finished_ms.append(s.trace_finished_ms)
        c.analysis_state.append(s.state)
        c.analysis_failure.append(s.failure)
        top = top_rule(s) if s.state == dyno_pb2.ANALYSIS_STATE_DONE else None
        c.top_rule.append(-1 if top is None else rules.setdefault(top.rule, len(rules)))
        c.top_rule_share.append(0.0 if top is None else top.time_lost_share)
    if analysis_rules:
        _analyses(c.analyses, [rows[i].latest_analysis for i in c.analysed_rows], rules)
    c.rules.extend(rules)
    return c


def _analyses(a: dyno_pb2.AnalysisColumns, analyses: list[dyno_pb2.TraceSummary], rules: dict[str, int]) -> None:
    """AnalysisColumns of the page's analyses, in its order; rule ids go in the page's `rules` (not yet written)."""
    a.SetInParent()  # set even when no record has an analysis: this dynod gives them
    messages: dict[str, int] = {}
    titles: dict[str, int] = {}
    fixes: dict[str, int] = {}
    a.rule_count.extend([len(s.rules) for s in analyses])
    a.failure_message_index.extend([messages.setdefault(s.failure_message, len(messages)) for s in analyses])
    losses = [r for s in analyses for r in s.rules]
    a.rule.extend([rules.setdefault(r.rule, len(rules)) for r in losses])
    a.time_lost_share.extend([r.time_lost_share for r in losses])
    a.title_index.extend([titles.setdefault(r.title, len(titles)) for r in losses])
    a.fix_index.extend([fixes.setdefault(r.fix, len(fixes)) for r in losses])
    a.failure_messages.extend(messages)
    a.titles.extend(titles)
    a.fixes.extend(fixes)

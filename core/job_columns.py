"""ListJobs' columnar page (dyno.v1.JobColumns) built from JobRecord messages: by dynod for a columnar request, and
by `dyno-cli jobs` for a host that answered records (a dynod older than the columnar form), so that one join
(dyno.client.jobs_columns) reads both.

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
# a record's most bytes in the page besides its job id and user: 10 varints of at most 10 bytes, 5 doubles, 2 bools,
# the strings' lengths (the user counted as if every record had its own; the page's hostnames and rule ids: a few)
_ROW_BYTES = 10 * 10 + 5 * 8 + 2 + 4


def top_rule(s: dyno_pb2.TraceSummary) -> dyno_pb2.RuleLoss | None:
    """A finished analysis' costliest rule: the greatest time_lost_share, the first of equal ones; None: no rules."""
    return max(s.rules, key=lambda r: r.time_lost_share) if s.rules else None


def fitting(records: Sequence[dyno_pb2.JobRecord], max_bytes: int | None = None, max_rows: int = MAX_ROWS) -> int:
    """How many of the first records make one page: at most `max_rows`, at least one (when there is one), fewer than
    given when the page would pass `max_bytes` (None: MAX_BYTES, read at the call)."""
    max_bytes = MAX_BYTES if max_bytes is None else max_bytes
    take, size = 0, 0
    for r in records[:max_rows]:
        size += _ROW_BYTES + len(r.job_id.encode()) + len(r.user.encode())
        if take and size > max_bytes:
            break
        take += 1
    return take


def job_columns(rows: Sequence[dyno_pb2.JobRecord]) -> dyno_pb2.JobColumns:
    """All of `rows` as columns (the caller bounds a page with `fitting`)."""
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
        c.analysis_state.append(s.state)
        c.analysis_failure.append(s.failure)
        top = top_rule(s) if s.state == dyno_pb2.ANALYSIS_STATE_DONE else None
        c.top_rule.append(-1 if top is None else rules.setdefault(top.rule, len(rules)))
        c.top_rule_share.append(0.0 if top is None else top.time_lost_share)
    c.rules.extend(rules)
    return c

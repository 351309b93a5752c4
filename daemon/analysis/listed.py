"""The form of a summary ListJobs carries in JobRecord.latest_analysis: bounded, so that a page of 1000 records,
each with its summary, stays within a stock gRPC client's 4 MiB (less 64 KiB). The rules with the most time lost
(at most MAX_LISTED_RULES, titles cut, without fixes) and the ranks with the longest steps (at most
MAX_LISTED_RANKS, fewer where MAX_LISTED_BYTES ends first); GetTraceSummary has the whole summary."""

from __future__ import annotations

from dataclasses import replace

from dyno.trace_summary import TraceSummary
from dyno.trace_summary_pb import summary_to_proto

__all__ = ["MAX_LISTED_BYTES", "MAX_LISTED_RANKS", "MAX_LISTED_RULES", "listed_form"]

MAX_LISTED_RULES = 16
MAX_LISTED_RANKS = 64
# A ListJobs page: 1000 records of at most ~1,050 bytes (jobs/records.py bounds them) and their summaries within
# 4 MiB - 64 KiB (tests/unit/daemon/analysis/test_listed.py fills a page with the largest of both).
MAX_LISTED_BYTES = 2900
_MAX_NAME = 64  # rule ids, titles, the analysed window
_MAX_ID = 128  # job id, user, host name (the record's own, bounded where they are made)
_MAX_MESSAGE = 240


def listed_form(s: TraceSummary) -> bytes:
    """The encoded dyno.v1.TraceSummary that ListJobs sends for `s` (never rank_parts), at most MAX_LISTED_BYTES:
    ranks are left out first (the fastest first), then rules (the least time lost first)."""
    rules = sorted(s.rules, key=lambda r: -r.time_lost_share)[:MAX_LISTED_RULES]
    slowest = sorted(s.ranks, key=lambda r: -r.mean_step_us)[:MAX_LISTED_RANKS]
    short = replace(
        s,
        job_id=s.job_id[:_MAX_ID],
        user=s.user[:_MAX_ID],
        hostname=s.hostname[:_MAX_ID],
        failure_message=s.failure_message[:_MAX_MESSAGE],
        analysed_window=s.analysed_window[:_MAX_NAME],
        rules=tuple(
            replace(r, rule=r.rule[:_MAX_NAME], severity=r.severity[:8], title=r.title[:_MAX_NAME], fix="")
            for r in rules
        ),
        extra={},
    )
    keep_ranks, keep_rules = len(slowest), len(rules)
    while True:
        ranks = tuple(sorted(slowest[:keep_ranks], key=lambda r: r.rank))
        data = summary_to_proto(replace(short, ranks=ranks, rules=short.rules[:keep_rules])).SerializeToString()
        if len(data) <= MAX_LISTED_BYTES or keep_ranks == keep_rules == 0:
            return data
        if keep_ranks:
            keep_ranks = keep_ranks * 3 // 4 if keep_ranks > 4 else keep_ranks - 1
        else:
            keep_rules -= 1

"""Prometheus series of the jobs' latest analyses, beside their dyno_job_* series (the same jobs: running, and a
few minutes after their end): `dyno_job_analysis_time_lost_ratio{job_id,user,rule}` (0..1: RuleLoss.time_lost_share
of each rule with findings in the job's latest finished analysis on this host) and
`dyno_job_analysis_timestamp_seconds{job_id,user}` (when that analysis ended); for a job whose latest analysis
FAILED, `dyno_job_analysis_failed{job_id,user}` 1 instead of both (its GPU time counts as never analysed, as in
ListJobs). Cardinality: at most MAX_RULES_PER_JOB rules per exported job (the most time lost)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric

from dyno.daemon.jobs.records import JobRecord
from dyno.trace_summary import AnalysisState, TraceSummary

__all__ = ["MAX_RULES_PER_JOB", "analysis_families"]

MAX_RULES_PER_JOB = 16


def analysis_families(
    hostname: str, records: Sequence[JobRecord], latest: Mapping[tuple[str, str], TraceSummary]
) -> list[Metric]:
    simulated = any(r.simulated for r in records)
    labels = ["host", "job_id", "user", *(["simulated"] if simulated else [])]
    sim = ["true"] if simulated else []
    lost = GaugeMetricFamily(
        "dyno_job_analysis_time_lost_ratio",
        "share of the analysed window the rule's findings lose, in the job's latest trace analysis on this host",
        labels=[*labels, "rule"],
    )
    when = GaugeMetricFamily(
        "dyno_job_analysis_timestamp_seconds",
        "unix time the job's latest trace analysis on this host ended",
        labels=labels,
    )
    failed = GaugeMetricFamily(
        "dyno_job_analysis_failed",
        "1 when the job's latest trace analysis on this host failed (the reason: GetTraceSummary, dyno-cli jobs)",
        labels=labels,
    )
    for r in records:
        s = latest.get(r.key)
        if s is None:
            continue
        if s.state == AnalysisState.FAILED:
            failed.add_metric([hostname, r.job_id, r.user, *sim], 1.0)
        if s.state != AnalysisState.DONE:
            continue
        when.add_metric([hostname, r.job_id, r.user, *sim], s.analyzed_ms / 1e3)
        shares: dict[str, float] = {}  # one series per rule (a rule named twice: its first entry)
        for rule in sorted(s.rules, key=lambda x: -x.time_lost_share):
            shares.setdefault(rule.rule, min(1.0, max(0.0, rule.time_lost_share)))
        for name, share in list(shares.items())[:MAX_RULES_PER_JOB]:
            lost.add_metric([hostname, r.job_id, r.user, *sim, name], share)
    return [lost, when, failed]

"""The inputs of `dyno-cli opportunities --prometheus`: the jobs' GPU-seconds per host as `dyno-cli jobs --prometheus`
reads them (client/jobs_prometheus.py: each counter's highest value in the range, the job's total on the host), and
their latest analyses from dynod's analysis series:

    dyno_job_analysis_time_lost_ratio{job_id,user,host,rule}   a rule's share in the newest finished analysis
    dyno_job_analysis_timestamp_seconds{job_id,user,host}      when that analysis ended
    dyno_job_analysis_failed{job_id,user,host}                 1 while the latest analysis is a failed one

A (job, host) with a timestamp series in the range was analysed (its shares: each rule's last value in the range);
one with only a failed series had failed analyses; one with neither was never analysed. Prometheus does not carry
the failures' reasons: the hosts' answers (`--hosts`) give them.
"""

from __future__ import annotations

from dataclasses import replace

from dyno.client.jobs_prometheus import instant_query, label_value, records_from_prometheus
from dyno.client.opportunities.model import JobHost
from dyno.trace_summary import AnalysisState, RuleLoss, TraceSummary

__all__ = ["FAILED", "RATIO", "TIMESTAMP", "from_prometheus"]

RATIO = "dyno_job_analysis_time_lost_ratio"
TIMESTAMP = "dyno_job_analysis_timestamp_seconds"
FAILED = "dyno_job_analysis_failed"
_BY = "job_id, user, host, instance"  # instance: the scrape target, one per daemon


def from_prometheus(base: str, since_s: float, *, user: str = "", timeout_s: float = 30.0) -> list[JobHost]:
    """One JobHost per (job, user, host, scrape target) with GPU time in the last `since_s` seconds. Raises
    jobs_prometheus.PrometheusError."""
    records = records_from_prometheus(base, since_s, user=user, timeout_s=timeout_s)
    sel = "{" + f"user={label_value(user)}" + "}" if user else ""
    r = f"{max(1, int(since_s))}s"
    ended: dict[tuple[str, ...], float] = {}
    for labels, value in instant_query(base, f"max by ({_BY}) (max_over_time({TIMESTAMP}{sel}[{r}]))", timeout_s):
        ended[_key(labels)] = value
    failed = {
        _key(labels)
        for labels, value in instant_query(base, f"max by ({_BY}) (max_over_time({FAILED}{sel}[{r}]))", timeout_s)
        if value > 0
    }
    shares: dict[tuple[str, ...], list[RuleLoss]] = {}
    expr = f"max by ({_BY}, rule) (last_over_time({RATIO}{sel}[{r}]))"
    for labels, value in instant_query(base, expr, timeout_s):
        if labels.get("rule"):
            shares.setdefault(_key(labels), []).append(RuleLoss(labels["rule"], "", value))
    out = []
    for daemon, rec in records:
        key = (rec.job_id, rec.user, rec.hostname, daemon)
        analysis = None
        of_job = TraceSummary(trace_id="prometheus", job_id=rec.job_id, user=rec.user, hostname=rec.hostname)
        if key in ended:
            rules = sorted(shares.get(key, []), key=lambda x: (-x.time_lost_share, x.rule))
            analysis = replace(of_job, state=AnalysisState.DONE, analyzed_ms=int(ended[key] * 1000), rules=tuple(rules))
        elif key in failed:
            analysis = replace(
                of_job,
                state=AnalysisState.FAILED,
                failure_message="failed (Prometheus has no reason: see dyno-cli jobs --hosts)",
            )
        out.append(JobHost(daemon, rec.hostname, rec.job_id, rec.user, rec.gpu_seconds, analysis))
    return out


def _key(labels: dict[str, str]) -> tuple[str, ...]:
    """(job_id, user, host, instance): records_from_prometheus gives a record's daemon as its instance, or its host
    when the series have no instance label."""
    host = labels.get("host", "")
    return (labels.get("job_id", ""), labels.get("user", ""), host, labels.get("instance", "") or host)

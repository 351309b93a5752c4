"""`dyno-cli opportunities --json`: the answer as a versioned document (schema in docs/OPPORTUNITIES.md)."""

from __future__ import annotations

from typing import Any

from dyno.client.opportunities.model import JobLoss, Opportunities, RuleOpportunity, Unanalysed

__all__ = ["SCHEMA", "VERSION", "to_json"]

SCHEMA = "dyno.opportunities"
VERSION = 1


def to_json(o: Opportunities) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "source": o.source,
        "since_s": o.since_s,
        "totals": {
            "gpu_hours": o.total_gpu_hours,
            "analysed_gpu_hours": o.analysed_gpu_hours,
            "never_analysed_gpu_hours": o.never_analysed_gpu_hours,
            "jobs": o.job_count,
            "analysed_jobs": o.analysed_job_count,
            "users": o.user_count,
            "hosts": o.host_count,
        },
        "rules": [_rule(i, r, o.analysed_gpu_hours) for i, r in enumerate(o.rules, 1)],
        "never_analysed": {
            "gpu_hours": o.never_analysed_gpu_hours,
            "jobs": o.unanalysed_job_count,
            "failed_analyses": o.failed_analysis_count,
            "top_jobs": [_unanalysed(u) for u in o.unanalysed],
        },
        "failed_hosts": [{"host": host, "error": error} for host, error in o.failed_hosts],
        "store_problems": list(o.store_problems),
    }


def _rule(rank: int, r: RuleOpportunity, analysed: float) -> dict[str, Any]:
    return {
        "rank": rank,
        "rule": r.rule,
        "title": r.title,
        "fix": r.fix,
        "recoverable_gpu_hours": r.recoverable_gpu_hours,
        "share_of_analysed": r.recoverable_gpu_hours / analysed if analysed > 0 else 0.0,
        "jobs": r.job_count,
        "users": r.user_count,
        "hosts": r.host_count,
        "top_jobs": [_job(j) for j in r.jobs],
    }


def _job(j: JobLoss) -> dict[str, Any]:
    return {
        "job_id": j.job_id,
        "user": j.user,
        "gpu_hours": j.gpu_hours,
        "share": j.share,
        "recoverable_gpu_hours": j.recoverable_gpu_hours,
        "hosts": list(j.hosts),
    }


def _unanalysed(u: Unanalysed) -> dict[str, Any]:
    return {
        "job_id": u.job_id,
        "user": u.user,
        "gpu_hours": u.gpu_hours,
        "hosts": list(u.hosts),
        "failures": [{"host": host, "reason": reason} for host, reason in u.failures],
    }

"""The ranking of `dyno-cli opportunities`: for each rule, Σ over (job, host) of the job's GPU-hours on the host x the
rule's time-lost share in the job's newest finished analysis there (state DONE). A host whose newest analysis
FAILED, or that has none, adds the job's GPU-hours there to "never analysed": unknown, never zero loss."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dyno.client.opportunities.model import JobHost, JobLoss, Opportunities, RuleOpportunity, Unanalysed
from dyno.trace_analysis.rule_texts import RULE_TEXTS, RuleText
from dyno.trace_summary import AnalysisFailure, AnalysisState, TraceSummary, newness

__all__ = ["DEFAULT_TOP", "MAX_TEXT", "failure_reason", "merged", "rank"]

DEFAULT_TOP = 5
MAX_TEXT = 1024  # a fix or reason from a daemon is shown cut to this many characters


def merged(inputs: Iterable[JobHost]) -> list[JobHost]:
    """One JobHost per (daemon, job id, user): a host holds several records of a job that ran more than once there;
    their GPU-seconds add up and the newest finished analysis (by trace_summary.newness: its trace's end, then
    analyzed_ms; DONE before FAILED at a tie; then the first record's) stands for them all."""
    out: dict[tuple[str, str, str], JobHost] = {}
    for j in inputs:
        key = (j.daemon, j.job_id, j.user)
        had = out.get(key)
        if had is None:
            out[key] = j
            continue
        analysis = had.analysis if _newer(had.analysis, j.analysis) else j.analysis
        seconds = had.gpu_seconds + j.gpu_seconds
        out[key] = JobHost(j.daemon, had.hostname or j.hostname, j.job_id, j.user, seconds, analysis)
    return list(out.values())


def _newer(a: TraceSummary | None, b: TraceSummary | None) -> bool:
    """Whether `a` stands for the job rather than `b`."""
    if b is None or not b.finished:
        return True
    if a is None or not a.finished:
        return False
    return (*newness(a), a.state is AnalysisState.DONE) >= (*newness(b), b.state is AnalysisState.DONE)


def _share(value: float) -> float:
    """A share as a daemon sent it, held to 0..1 (a non-number is no loss)."""
    return min(1.0, max(0.0, value)) if math.isfinite(value) else 0.0


def _reason(s: TraceSummary) -> str:
    return failure_reason(s.failure, s.failure_message) if s.state is AnalysisState.FAILED else ""


def failure_reason(failure: AnalysisFailure, message: str) -> str:
    """A failed analysis' reason as shown: "timed out: worker killed" (the message cut to MAX_TEXT)."""
    words = message[:MAX_TEXT] or "no reason given"
    return f"{failure.value.lower().replace('_', ' ')}: {words}" if failure.value != "NONE" else words


@dataclass
class _JobSum:
    gpu_hours: float = 0.0  # analysed (DONE) hosts
    unanalysed_gpu_hours: float = 0.0
    unanalysed_hosts: set[str] = field(default_factory=set)
    failures: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class _RuleSum:
    recoverable: float = 0.0
    per_job: dict[tuple[str, str], float] = field(default_factory=dict)
    job_hosts: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    daemons: set[str] = field(default_factory=set)
    title: str = ""
    fix: str = ""
    fix_weight: float = -1.0  # the fix and title shown: those of the biggest contribution's finding


def rank(
    inputs: Iterable[JobHost],
    *,
    since_s: float,
    source: str,
    top: int = DEFAULT_TOP,
    failed_hosts: Iterable[tuple[str, str]] = (),
    store_problems: Iterable[str] = (),
    texts: Mapping[str, RuleText] = RULE_TEXTS,
) -> Opportunities:
    """The rules ranked by recoverable GPU-hours (then rule id), each with its `top` jobs; the never-analysed jobs
    by GPU-hours. Jobs without GPU time are left out."""
    jobs: dict[tuple[str, str], _JobSum] = {}
    rules: dict[str, _RuleSum] = {}
    daemons: set[str] = set()
    failed = 0
    for j in merged(inputs):
        if not j.gpu_seconds > 0:
            continue
        key, host, hours = (j.job_id, j.user), j.hostname or j.daemon, j.gpu_seconds / 3600.0
        daemons.add(j.daemon)
        js = jobs.setdefault(key, _JobSum())
        a = j.analysis
        if a is None or a.state is not AnalysisState.DONE:
            js.unanalysed_gpu_hours += hours
            js.unanalysed_hosts.add(host)
            if a is not None and a.state is AnalysisState.FAILED:
                js.failures.append((host, _reason(a)))
                failed += 1
            continue
        js.gpu_hours += hours
        for loss in a.rules:
            gain = hours * _share(loss.time_lost_share)
            if gain <= 0:
                continue
            rs = rules.setdefault(loss.rule, _RuleSum())
            rs.recoverable += gain
            rs.per_job[key] = rs.per_job.get(key, 0.0) + gain
            rs.job_hosts.setdefault(key, set()).add(host)
            rs.daemons.add(j.daemon)
            if gain > rs.fix_weight:
                rs.fix_weight = gain
                rs.fix = loss.fix[:MAX_TEXT] or rs.fix
                rs.title = loss.title[:MAX_TEXT] or rs.title
    opportunities = [_opportunity(rule, rs, jobs, texts, top) for rule, rs in rules.items()]
    opportunities.sort(key=lambda o: (-o.recoverable_gpu_hours, o.rule))
    never = [
        Unanalysed(job, user, js.unanalysed_gpu_hours, tuple(sorted(js.unanalysed_hosts)), tuple(sorted(js.failures)))
        for (job, user), js in jobs.items()
        if js.unanalysed_gpu_hours > 0
    ]
    never.sort(key=lambda u: (-u.gpu_hours, u.job_id, u.user))
    analysed = sum(js.gpu_hours for js in jobs.values())
    unknown = sum(js.unanalysed_gpu_hours for js in jobs.values())
    return Opportunities(
        since_s=since_s,
        source=source,
        total_gpu_hours=analysed + unknown,
        analysed_gpu_hours=analysed,
        never_analysed_gpu_hours=unknown,
        job_count=len(jobs),
        analysed_job_count=sum(1 for js in jobs.values() if js.gpu_hours > 0),
        user_count=len({user for _, user in jobs}),
        host_count=len(daemons),
        rules=tuple(opportunities),
        unanalysed=tuple(never[:top]),
        unanalysed_job_count=len(never),
        failed_analysis_count=failed,
        failed_hosts=tuple(failed_hosts),
        store_problems=tuple(store_problems),
    )


def _opportunity(
    rule: str, rs: _RuleSum, jobs: Mapping[tuple[str, str], _JobSum], texts: Mapping[str, RuleText], top: int
) -> RuleOpportunity:
    known = texts.get(rule)
    losses = [
        JobLoss(job, user, jobs[(job, user)].gpu_hours, gain, tuple(sorted(rs.job_hosts[(job, user)])))
        for (job, user), gain in rs.per_job.items()
    ]
    losses.sort(key=lambda x: (-x.recoverable_gpu_hours, x.job_id, x.user))
    return RuleOpportunity(
        rule=rule,
        title=rs.title or (known.title if known else ""),
        fix=rs.fix or (known.fix if known else ""),
        recoverable_gpu_hours=rs.recoverable,
        job_count=len(rs.per_job),
        user_count=len({user for _, user in rs.per_job}),
        host_count=len(rs.daemons),
        jobs=tuple(losses[:top]),
    )

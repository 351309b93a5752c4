"""The typed inputs and answer of `dyno-cli opportunities`.

Input: one JobHost per (daemon, job id, user): the job's GPU-seconds on that host and the newest finished analysis of
its traces there (or none). Output: Opportunities, the rules ranked by GPU-hours recoverable, and the GPU-hours
nobody analysed (unknown, never counted as zero loss).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dyno.trace_summary import TraceSummary

__all__ = ["JobHost", "JobLoss", "Opportunities", "RuleOpportunity", "Unanalysed"]


@dataclass(frozen=True)
class JobHost:
    """One job's use of one host. `analysis`: the newest finished analysis of its traces there (DONE or FAILED);
    None when none was finished. `daemon`: the daemon (or scrape target) the figures came from; `hostname` is the
    name the host gives itself."""

    daemon: str
    hostname: str
    job_id: str
    user: str
    gpu_seconds: float
    analysis: TraceSummary | None = None


@dataclass(frozen=True)
class JobLoss:
    """One job's loss to one rule over its analysed hosts. `gpu_hours`: the job's GPU-hours on those hosts;
    `share`: recoverable / gpu_hours (the hosts' shares weighted by their GPU-hours)."""

    job_id: str
    user: str
    gpu_hours: float
    recoverable_gpu_hours: float
    hosts: tuple[str, ...]

    @property
    def share(self) -> float:
        return self.recoverable_gpu_hours / self.gpu_hours if self.gpu_hours > 0 else 0.0


@dataclass(frozen=True)
class RuleOpportunity:
    """One rule: Σ over (job, host) of GPU-hours x the rule's time-lost share in that analysis. `jobs`: the top
    ones (most recoverable first); `job_count` / `user_count`: all the jobs and users it touches."""

    rule: str
    title: str
    fix: str
    recoverable_gpu_hours: float
    job_count: int
    user_count: int
    host_count: int
    jobs: tuple[JobLoss, ...]


@dataclass(frozen=True)
class Unanalysed:
    """A job's GPU-hours on hosts where no finished analysis of it is DONE: `failures` names the hosts whose newest
    analysis FAILED, with the reason; the others' traces were never analysed (none taken, or still pending)."""

    job_id: str
    user: str
    gpu_hours: float
    hosts: tuple[str, ...]
    failures: tuple[tuple[str, str], ...] = ()  # (host, reason)


@dataclass(frozen=True)
class Opportunities:
    """The answer. GPU-hours: `total` = `analysed` + `never_analysed`; `rules` ranked by recoverable GPU-hours,
    `unanalysed` by GPU-hours (both lists cut to the top ones: the counts and sums are over all)."""

    since_s: float
    source: str  # "daemons" or the Prometheus URL
    total_gpu_hours: float
    analysed_gpu_hours: float
    never_analysed_gpu_hours: float
    job_count: int
    analysed_job_count: int
    user_count: int
    host_count: int
    rules: tuple[RuleOpportunity, ...]
    unanalysed: tuple[Unanalysed, ...]
    unanalysed_job_count: int
    failed_analysis_count: int  # (job, host) pairs whose newest analysis FAILED
    failed_hosts: tuple[tuple[str, str], ...] = field(default=())  # (daemon, error): hosts that did not answer
    store_problems: tuple[str, ...] = ()  # "daemon: problem": job databases unusable (running jobs only there)

"""The fleet's jobs, one row per job across its hosts, ranked by wasted GPU-hours: from the daemons' ListJobs
records (`from_records`) or from a Prometheus server's job series (client/jobs_prometheus.py builds the same rows).

Wasted GPU-hours = GPU-hours held x (1 - active fraction), the fraction being SM-active where every host of the job
measured it over all its GPU time (GPM), else NVML's busy (utilization) fraction; the `basis` says which.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dyno.client.format import human_duration, table
from dyno.job_columns import top_rule
from dyno.trace_summary import AnalysisFailure, newness
from dyno.trace_summary_pb import failure_from_proto
from dyno.v1 import dyno_pb2

__all__ = [
    "BASIS_BUSY",
    "BASIS_SM",
    "GPM_COVERED",
    "JobRow",
    "analysis_text",
    "analysis_words",
    "from_records",
    "ranked",
    "render",
    "to_json",
]

BASIS_BUSY = "busy"
BASIS_SM = "sm"
GPM_COVERED = 0.999  # gpm_gpu_seconds / gpu_seconds at or above this: the whole record had GPM


@dataclass(frozen=True)
class JobRow:
    job_id: str
    user: str
    hosts: tuple[str, ...]  # the host names its records give
    host_count: int  # the daemons that had it (two on one machine have one host name)
    gpus: int  # the most GPUs held at once on each daemon's host, summed
    start_ms: int
    end_ms: int  # last seen
    running: bool
    gpu_seconds: float
    busy_gpu_seconds: float
    sm_active_gpu_seconds: float | None  # None: not every host measured it
    traces: int
    simulated: bool = False  # some of its GPUs were the sim backend's
    analysis: str = ""  # its latest trace analysis in words (analysis_text), "" when none was analysed

    @property
    def gpu_hours(self) -> float:
        return self.gpu_seconds / 3600.0

    @property
    def busy_fraction(self) -> float:
        return self.busy_gpu_seconds / self.gpu_seconds if self.gpu_seconds > 0 else 0.0

    @property
    def sm_fraction(self) -> float | None:
        if self.sm_active_gpu_seconds is None or self.gpu_seconds <= 0:
            return None
        return self.sm_active_gpu_seconds / self.gpu_seconds

    @property
    def basis(self) -> str:
        return BASIS_SM if self.sm_fraction is not None else BASIS_BUSY

    @property
    def wasted_gpu_hours(self) -> float:
        active = self.sm_fraction if self.sm_fraction is not None else self.busy_fraction
        return self.gpu_hours * (1.0 - min(1.0, max(0.0, active)))


class _Totals:
    """One job's sums while the records stream by (one pass: a fleet's answer holds millions of records)."""

    __slots__ = (
        "hostnames",
        "per_host",
        "start",
        "end",
        "running",
        "gpu_s",
        "busy",
        "sm",
        "covered",
        "traces",
        "simulated",
        "analysis",
    )

    def __init__(self) -> None:
        self.hostnames: set[str] = set()
        self.per_host: dict[str, int] = {}
        self.start = 0
        self.end = 0
        self.running = False
        self.gpu_s = 0.0
        self.busy = 0.0
        self.sm = 0.0
        self.covered: bool | None = None  # None: no record with GPU time yet
        self.traces = 0
        self.simulated = False
        self.analysis: dyno_pb2.TraceSummary | None = None  # the newest (trace_summary.newness) over its records


def from_records(records: Iterable[tuple[str, dyno_pb2.JobRecord]]) -> list[JobRow]:
    """One row per (job id, user) over every daemon's records of it, each given with the daemon it came from (a job
    spans hosts; a host may hold several records of one job id when it ran more than once: they add up). Its
    analysis is the newest of its records' latest analyses by dyno.trace_summary.newness (its newest trace's, not
    the one analysed last), the first record's of equally new ones."""
    jobs: dict[tuple[str, str], _Totals] = {}
    for daemon, r in records:
        key = (r.job_id, r.user)
        t = jobs.get(key)
        first = r.first_seen_ms
        if t is None:
            t = jobs[key] = _Totals()
            t.start = first
        elif first < t.start:
            t.start = first
        t.end = max(t.end, r.last_seen_ms)
        t.hostnames.add(r.hostname)
        t.per_host[daemon] = max(t.per_host.get(daemon, 0), r.gpus_max)
        t.running = t.running or r.running
        t.simulated = t.simulated or r.simulated
        gpu_s = r.gpu_seconds
        t.gpu_s += gpu_s
        t.busy += r.busy_gpu_seconds
        t.sm += r.sm_active_gpu_seconds
        t.traces += r.traces
        if r.HasField("latest_analysis") and (
            t.analysis is None or newness(r.latest_analysis) > newness(t.analysis)
        ):  # (the first record's of equally new ones)
            t.analysis = r.latest_analysis
        if gpu_s > 0:
            full = r.gpm_gpu_seconds >= GPM_COVERED * gpu_s
            t.covered = full if t.covered is None else (t.covered and full)
    return ranked(
        JobRow(
            job_id=job_id,
            user=user,
            hosts=tuple(sorted(t.hostnames)),
            host_count=len(t.per_host),
            gpus=sum(t.per_host.values()),
            start_ms=t.start,
            end_ms=t.end,
            running=t.running,
            gpu_seconds=t.gpu_s,
            busy_gpu_seconds=t.busy,
            sm_active_gpu_seconds=t.sm if t.covered else None,
            traces=t.traces,
            simulated=t.simulated,
            analysis=analysis_text(t.analysis) if t.analysis is not None else "",
        )
        for (job_id, user), t in jobs.items()
    )


def analysis_text(s: dyno_pb2.TraceSummary) -> str:
    """A job's latest analysis in a table cell: its costliest rule and share, or "analysis failed: <reason>"."""
    top = top_rule(s)
    return analysis_words(s.state, s.failure, top.rule if top else "", top.time_lost_share if top else 0.0)


def analysis_words(state: int, failure: int, rule: str, share: float) -> str:
    """analysis_text of an analysis in this state (dyno.v1.AnalysisState), failure (dyno.v1.AnalysisFailure) and
    costliest rule ("": no rules) with its time_lost_share."""
    if state == dyno_pb2.ANALYSIS_STATE_FAILED:
        reason = failure_from_proto(failure)  # a value this client does not know: CRASHED
        words = "unknown" if reason is AnalysisFailure.NONE else reason.value.replace("_", " ").lower()
        return f"analysis failed: {words}"
    if state != dyno_pb2.ANALYSIS_STATE_DONE:
        return ""
    if not rule:
        return "no findings"
    return f"{rule} {100.0 * min(1.0, max(0.0, share)):.0f}%"


def ranked(rows: Iterable[JobRow]) -> list[JobRow]:
    """Most wasted GPU-hours first; then most GPU-hours, then job id (a stable order for equal rows)."""
    return sorted(rows, key=lambda r: (-r.wasted_gpu_hours, -r.gpu_seconds, r.job_id, r.user))


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100.0 * x:.1f}%"


def _start(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ms / 1000))


def render(rows: Sequence[JobRow], max_width: int | None = None) -> str:
    body = [
        [
            r.job_id + (" *" if r.running else "") + (" (SIMULATED)" if r.simulated else ""),
            r.user,
            r.host_count,
            r.gpus,
            _start(r.start_ms),
            human_duration(max(0.0, (r.end_ms - r.start_ms) / 1000)),
            f"{r.gpu_hours:.2f}",
            _pct(r.busy_fraction),
            _pct(r.sm_fraction),
            f"{r.wasted_gpu_hours:.2f} ({r.basis})",
            r.traces,
            r.analysis or "-",
        ]
        for r in rows
    ]
    headers = [
        "JOB",
        "USER",
        "HOSTS",
        "GPUS",
        "START",
        "DURATION",
        "GPU-HOURS",
        "BUSY",
        "SM-ACTIVE",
        "WASTED",
        "TRACES",
        "ANALYSIS",
    ]
    note = (
        "(* running; WASTED: GPU-hours x (1 - busy or SM-active); SIMULATED: GPUs of dynod's sim backend; "
        "ANALYSIS: the latest trace analysis' costliest rule and its share of time lost)"
    )
    return table(headers, body, max_width=max_width) + "\n" + note


def to_json(rows: Sequence[JobRow]) -> list[dict[str, object]]:
    return [
        {
            "job_id": r.job_id,
            "user": r.user,
            "hosts": list(r.hosts),
            "host_count": r.host_count,
            "gpus": r.gpus,
            "start_ms": r.start_ms,
            "last_seen_ms": r.end_ms,
            "running": r.running,
            "gpu_hours": r.gpu_hours,
            "busy_fraction": r.busy_fraction,
            "sm_active_fraction": r.sm_fraction,
            "wasted_gpu_hours": r.wasted_gpu_hours,
            "wasted_basis": r.basis,
            "traces": r.traces,
            "simulated": r.simulated,
            "analysis": r.analysis or None,
        }
        for r in rows
    ]

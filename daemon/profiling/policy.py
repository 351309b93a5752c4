"""Whether periodic profiling takes a job's moment on this host, and with which processes and request: pure
functions over plain values (no clock, no registry), so every rule is tested without a daemon.

Skipped: a moment found more than LATE_MS after it passed (dynod was stopped or stalled: the other hosts took it, or
did not; a late trace would record other steps than theirs); a job that job accounting does not count as running
(unknown yet, or ended); one without a trainer process on this host (launchers only); one younger than
periodic_min_job_age_s; one whose chosen processes are ending (an agent whose connection is gone, a libkineto
process silent for SILENT_MS); one whose chosen processes are tracing already (an on-demand trace: it is never
interrupted; a periodic one wins only over nothing); one the budget does not allow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from dyno.daemon.process_roles import ROLE_TRAINER
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.tracing.values import TraceSpec

__all__ = [
    "ITERATION_ROUNDUP",
    "KINETO_LEAD_MS",
    "LATE_MS",
    "SILENT_MS",
    "JobState",
    "PeriodicSettings",
    "SkipReason",
    "choose",
    "iteration_trace",
    "lead_ms",
    "skip_reason",
    "trace_spec",
]

LATE_MS = 10_000
SILENT_MS = 5_000  # a libkineto process polls every ~1 s; one silent this long is ending (or stopped)
# A duration trace is handed over this long before its moment, and starts at the moment itself (start_time_ms):
# libkineto picks a request up at its next poll, ~1 s later
KINETO_LEAD_MS = 2_000
# An iteration trace is handed over at the moment and starts at the next multiple of this many optimizer steps:
# processes of one job that step together (DDP) start at the same step on every host (dyno-cli trace's default)
ITERATION_ROUNDUP = 10


@dataclass(frozen=True)
class PeriodicSettings:
    """dynod's periodic_* keys, in ms (DaemonConfig; resolve checks them)."""

    interval_ms: int
    iterations: int = 5
    duration_ms: int = 3000
    ranks_per_host: int = 1
    budget: float = 0.01
    min_job_age_ms: int = 300_000


class SkipReason(str, Enum):
    LATE = "late"
    NOT_RUNNING = "not_running"
    NO_TRAINER = "no_trainer"
    TOO_YOUNG = "too_young"
    ENDING = "ending"
    BUSY = "busy"
    BUDGET = "budget"
    START_FAILED = "start_failed"


@dataclass(frozen=True)
class JobState:
    """One job as this host sees it at a tick."""

    job_id: str
    running: bool  # job accounting has a running record of it
    first_seen_ms: int  # the start of its oldest running record (its age's origin)
    procs: tuple[RegisteredProcess, ...]  # its registered processes (launchers included)


def choose(procs: Sequence[RegisteredProcess], roles: Mapping[int, str], count: int) -> list[RegisteredProcess]:
    """The `count` trainers of lowest rank (those without a rank last, then by pid): the same ones at every
    moment while they run. Launchers and DataLoader workers are never chosen."""
    trainers = [p for p in procs if not p.launcher and roles.get(p.pid, ROLE_TRAINER) == ROLE_TRAINER]
    trainers.sort(key=lambda p: (p.rank is None, p.rank or 0, p.pid))
    return trainers[:count]


def iteration_trace(chosen: Sequence[RegisteredProcess]) -> bool:
    """Iterations when every chosen process has the dyno agent (which counts optimizer steps), else a duration."""
    return bool(chosen) and all(p.protocol == PROTOCOL_AGENT for p in chosen)


def lead_ms(chosen: Sequence[RegisteredProcess]) -> int:
    """How long before its moment a trace of `chosen` is handed over."""
    return 0 if iteration_trace(chosen) else KINETO_LEAD_MS


def _ending(p: RegisteredProcess, now_ms: int) -> bool:
    if p.protocol == PROTOCOL_AGENT:
        return not p.connected
    return now_ms - p.last_seen_ms > SILENT_MS


def skip_reason(
    job: JobState,
    chosen: Sequence[RegisteredProcess],
    moment_ms: int,
    now_ms: int,
    settings: PeriodicSettings,
    *,
    budget_allows: bool,
) -> SkipReason | None:
    """Why the moment is skipped (the rules of the module's doc, in that order), None when it is taken."""
    if now_ms - moment_ms > LATE_MS:
        return SkipReason.LATE
    if not job.running:
        return SkipReason.NOT_RUNNING
    if not chosen:
        return SkipReason.NO_TRAINER
    if now_ms - job.first_seen_ms < settings.min_job_age_ms:
        return SkipReason.TOO_YOUNG
    if any(_ending(p, now_ms) for p in chosen):
        return SkipReason.ENDING
    if any(p.busy for p in chosen):
        return SkipReason.BUSY
    if not budget_allows:
        return SkipReason.BUDGET
    return None


def trace_spec(
    job_id: str, trace_id: str, chosen: Sequence[RegisteredProcess], moment_ms: int, s: PeriodicSettings
) -> TraceSpec:
    """The request of one moment: exactly the chosen processes, synchronized on the moment."""
    pids = tuple(p.pid for p in chosen)
    spec = TraceSpec(job_id, pids=pids, process_limit=len(pids), trace_id=trace_id, periodic=True)
    if iteration_trace(chosen):
        return replace(spec, iterations=s.iterations, start_iteration_roundup=ITERATION_ROUNDUP)
    return replace(spec, duration_ms=s.duration_ms, start_time_ms=moment_ms)

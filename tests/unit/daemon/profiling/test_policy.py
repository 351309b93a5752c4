"""Skip rules and the request of a moment: pure functions over plain values."""

from __future__ import annotations

import pytest

from dyno.daemon.process_roles import ROLE_DATALOADER, ROLE_LAUNCHER
from dyno.daemon.profiling.policy import (
    ITERATION_ROUNDUP,
    KINETO_LEAD_MS,
    LATE_MS,
    SILENT_MS,
    JobState,
    PeriodicSettings,
    SkipReason,
    choose,
    lead_ms,
    skip_reason,
    trace_spec,
)
from dyno.daemon.registered_process import PROTOCOL_AGENT, PROTOCOL_KINETO, RegisteredProcess

pytestmark = pytest.mark.unit

NOW = 1_800_000_000_000
S = PeriodicSettings(interval_ms=60_000, iterations=7, duration_ms=2_000, ranks_per_host=2, min_job_age_ms=300_000)


def agent(
    pid: int, rank: int | None, *, connected: bool = True, busy: bool = False, launcher: str = ""
) -> RegisteredProcess:
    return RegisteredProcess(
        pid=pid, job_id="J", protocol=PROTOCOL_AGENT, rank=rank, connected=connected, busy=busy, launcher=launcher
    )


def kineto(pid: int, rank: int | None, last_seen_ms: int = NOW) -> RegisteredProcess:
    return RegisteredProcess(pid=pid, job_id="J", protocol=PROTOCOL_KINETO, rank=rank, last_seen_ms=last_seen_ms)


def test_choose_takes_the_lowest_ranks_of_trainers_only() -> None:
    procs = [agent(10, 3), agent(11, 1), agent(12, None), agent(13, 0, launcher="torchrun"), agent(14, 0), agent(15, 2)]
    roles = {15: ROLE_DATALOADER, 16: ROLE_LAUNCHER}
    assert [p.pid for p in choose(procs, roles, 2)] == [14, 11]
    assert [p.pid for p in choose(procs, roles, 10)] == [14, 11, 10, 12]  # no rank: last
    assert [p.pid for p in choose(list(reversed(procs)), roles, 2)] == [14, 11]  # stable whatever the order


def _job(*procs: RegisteredProcess, running: bool = True, age_ms: int = 600_000) -> JobState:
    return JobState("J", running, NOW - age_ms, procs)


def _why(job: JobState, moment: int = NOW, now: int = NOW, allows: bool = True) -> SkipReason | None:
    return skip_reason(job, choose(job.procs, {}, S.ranks_per_host), moment, now, S, budget_allows=allows)


def test_a_running_old_enough_idle_job_is_traced() -> None:
    assert _why(_job(agent(1, 0))) is None


@pytest.mark.parametrize(
    ("job", "kw", "reason"),
    [
        (_job(agent(1, 0)), {"now": NOW + LATE_MS + 1}, SkipReason.LATE),
        (_job(agent(1, 0), running=False), {}, SkipReason.NOT_RUNNING),
        (_job(), {}, SkipReason.NO_TRAINER),
        (_job(agent(1, 0, launcher="torchrun")), {}, SkipReason.NO_TRAINER),
        (_job(agent(1, 0), age_ms=299_000), {}, SkipReason.TOO_YOUNG),
        (_job(agent(1, 0, connected=False)), {}, SkipReason.ENDING),
        (_job(kineto(1, 0, last_seen_ms=NOW - SILENT_MS - 1)), {}, SkipReason.ENDING),
        (_job(agent(1, 0, busy=True)), {}, SkipReason.BUSY),
        (_job(agent(1, 0)), {"allows": False}, SkipReason.BUDGET),
    ],
)
def test_skip_rules(job: JobState, kw: dict, reason: SkipReason) -> None:
    assert _why(job, **kw) == reason


def test_agent_processes_get_iterations_from_the_next_roundup_step() -> None:
    chosen = [agent(1, 0), agent(2, 1)]
    spec = trace_spec("J", "periodic-J-x", chosen, NOW, S)
    assert spec.iterations == 7 and spec.start_iteration_roundup == ITERATION_ROUNDUP and spec.duration_ms is None
    assert spec.pids == (1, 2) and spec.process_limit == 2 and spec.periodic and spec.trace_id == "periodic-J-x"
    assert lead_ms(chosen) == 0


def test_libkineto_processes_get_a_duration_from_the_moment_itself() -> None:
    chosen = [agent(1, 0), kineto(2, 1)]  # any libkineto process: a duration trace for all
    spec = trace_spec("J", "periodic-J-x", chosen, NOW, S)
    assert spec.duration_ms == 2_000 and spec.start_time_ms == NOW and spec.iterations is None
    assert lead_ms(chosen) == KINETO_LEAD_MS

"""The budget seeded at start from the trace dir's records (written by journal.write_record, read back through
load_record): finished periodic traces only, each for the job its request names, oldest first, the newest N at
most, records not believed skipped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from trace_records import write_trace_record

from dyno.daemon.profiling.budget import Budget, JobUsage
from dyno.daemon.profiling.resume import ResumedBudget, periodic_records, resume_budget
from dyno.daemon.tracing import journal, recorded
from dyno.daemon.tracing.values import TraceState, TraceView

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000


def _record(
    trace_dir: Path,
    trace_id: str,
    job_id: str,
    ms: int,
    *,
    created_ms: int,
    periodic: bool = True,
    state: TraceState = TraceState.DONE,
) -> Path:
    """A one-process trace of `job_id` whose profiler ran `ms`, recorded as dynod records it."""
    return write_trace_record(
        trace_dir,
        trace_id,
        job_id=job_id,
        state=state,
        periodic=periodic,
        start_iteration_roundup=10,
        created_ms=created_ms,
        updated_ms=created_ms + 1000 + ms,
        running_ms=created_ms + 1000,
        recorded_ms=created_ms + 1000 + ms,
    )


def _age(record: Path, seconds_ago: int) -> None:
    t = T0 / 1000 - seconds_ago
    os.utime(record, (t, t))


def test_each_finished_periodic_trace_counts_for_the_job_its_request_names(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    # written newest first: the order counted is the traces' own (created), not the files'
    _record(traces, "periodic-A-20270115T0900Z", "A", 3_000, created_ms=T0 + 60_000)
    _record(traces, "periodic-A-20270115T0800Z", "A", 2_000, created_ms=T0)
    _record(traces, "periodic-X-20270115T0800Z", "B", 1_500, created_ms=T0)  # the record's job, not the id's
    _record(traces, "periodic-A-ondemand", "A", 9_000, created_ms=T0, periodic=False)  # a user's id: on-demand
    _record(traces, "periodic-A-20270115T1000Z", "A", 9_000, created_ms=T0 + 120_000, state=TraceState.RUNNING)
    # cancelled before its profiler recorded anything: a trace of 0 s (E stays the newest measured one's)
    _record(traces, "periodic-A-20270115T0700Z", "A", 0, created_ms=T0 - 60_000, state=TraceState.CANCELLED)
    budget = Budget(0.01, default_expected_ms=500)

    assert resume_budget(budget, traces) == ResumedBudget(traces=4, jobs=2, profiled_ms=6_500)
    assert budget.usage("A") == JobUsage(profiled_ms=5_000, traces=3, last_ms=3_000)
    assert budget.usage("B") == JobUsage(profiled_ms=1_500, traces=1, last_ms=1_500)
    assert budget.usage("X") == JobUsage()
    assert budget.expected_ms("A") == 3_000  # E: the newest trace's time
    assert not budget.allows("A", age_ms=100_000)  # 5 s of 100 s is beyond 1%: the restart did not reset it


def test_only_the_newest_records_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    traces = tmp_path / "traces"
    for i in range(5):
        _age(_record(traces, f"periodic-A-{i}", "A", 1_000 * (i + 1), created_ms=T0 + i), seconds_ago=100 - i)
    loaded: list[str] = []
    real = journal.load_record

    def counting(trace_dir: Path, trace_id: str, *, quiet: bool = False) -> TraceView | None:
        loaded.append(trace_id)
        return real(trace_dir, trace_id, quiet=quiet)

    monkeypatch.setattr(recorded, "load_record", counting)
    budget = Budget(0.01, 500)
    assert resume_budget(budget, traces, limit=2) == ResumedBudget(2, 1, 4_000 + 5_000)
    assert sorted(loaded) == ["periodic-A-3", "periodic-A-4"]  # the others are never opened
    assert budget.usage("A").last_ms == 5_000


def test_records_not_believed_are_not_counted(tmp_path: Path) -> None:
    """Which records are not believed, and their warnings: tests/unit/daemon/tracing/test_recorded.py."""
    traces = tmp_path / "traces"
    _record(traces, "periodic-A-1", "A", 1_000, created_ms=T0)
    bad = _record(traces, "periodic-A-2", "A", 50_000, created_ms=T0 + 1)
    bad.write_bytes(bad.read_bytes().replace(b'"running_ms": ', b'"running_ms": -'))
    (traces / "periodic-A-4").mkdir()  # a folder without a record: a trace still running at the restart
    assert [v.trace_id for v in periodic_records(traces)] == ["periodic-A-1"]


def test_no_trace_dir_yet_resumes_nothing(tmp_path: Path) -> None:
    budget = Budget(0.01, 500)
    assert resume_budget(budget, tmp_path / "absent") == ResumedBudget()
    assert budget.usage("A") == JobUsage()

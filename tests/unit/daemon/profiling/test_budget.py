"""The budget: (profiled + expected) <= budget x (age + expected), measured from the trace manager's views."""

from __future__ import annotations

import pytest

from dyno.daemon.profiling.budget import Budget, binding_note, profiled_ms
from dyno.daemon.registered_process import PROTOCOL_AGENT
from dyno.daemon.tracing.values import ProcessTraceView, TraceSpec, TraceState, TraceView

pytestmark = pytest.mark.unit


def _part(pid: int, state: TraceState, running_ms: int, end_ms: int) -> ProcessTraceView:
    return ProcessTraceView(pid, "J", 0, PROTOCOL_AGENT, state, "", updated_ms=end_ms, running_ms=running_ms)


def _view(*parts: ProcessTraceView, duration_ms: int | None = None) -> TraceView:
    spec = TraceSpec("J", duration_ms=duration_ms, iterations=None if duration_ms else 5)
    return TraceView("t", spec, parts, True, 0)


def test_profiled_time_is_the_longest_part_start_to_end() -> None:
    view = _view(_part(1, TraceState.DONE, 1_000, 3_500), _part(2, TraceState.DONE, 1_200, 2_000))
    assert profiled_ms(view) == 2_500  # parallel parts: the job's wall time, not their sum
    cancelled = _view(_part(1, TraceState.CANCELLED, 1_000, 1_400))
    assert profiled_ms(cancelled) == 400  # it recorded until it was cancelled
    never = _view(_part(1, TraceState.TIMED_OUT, 0, 9_000))
    assert profiled_ms(never) == 0  # never under the profiler
    # done without a RUNNING report (a libkineto duration trace): its requested duration
    assert profiled_ms(_view(_part(1, TraceState.DONE, 0, 9_000), duration_ms=3_000)) == 3_000


def test_first_trace_waits_until_the_job_is_old_enough_for_its_expected_length() -> None:
    b = Budget(0.01, default_expected_ms=3_000)
    # 3 s of a 1% budget needs a job of 297 s: 3 <= 0.01 * (297 + 3)
    assert not b.allows("J", age_ms=296_000)
    assert b.allows("J", age_ms=297_000)


def test_measured_traces_use_up_the_budget() -> None:
    b = Budget(0.01, default_expected_ms=3_000)
    b.record("J", 2_000)
    assert b.usage("J").profiled_ms == 2_000 and b.expected_ms("J") == 2_000  # the last measured length
    # 2 s spent + 2 s expected <= 1% of (age + 2 s): age >= 398 s
    assert not b.allows("J", age_ms=397_000)
    assert b.allows("J", age_ms=398_000)
    assert not b.allows("J", age_ms=398_000, running_ms=2_000)  # a trace in flight counts too
    assert b.allows("K", age_ms=300_000)  # per job


def test_a_share_that_is_kept_is_never_above_the_budget() -> None:
    """Simulated: a job traced at every moment the rule allows, 1 s traces every 10 s, budget 2%."""
    b = Budget(0.02, default_expected_ms=1_000)
    taken = 0
    for age_s in range(0, 3_600, 10):
        if b.allows("J", age_ms=age_s * 1000):
            b.record("J", 1_000)
            taken += 1
            assert b.usage("J").profiled_ms <= 0.02 * (age_s * 1000 + 1_000)
    assert taken > 50  # and it does trace: about 2% of an hour is 72 s


def test_binding_note_when_the_interval_would_exceed_the_budget() -> None:
    assert binding_note(1800, 3_000, 0.01) == ""  # 0.17% of the time
    note = binding_note(60, 3_000, 0.01)
    assert "5%" in note and "periodic_budget 1%" in note and "every 300 s" in note


def test_budget_must_be_a_share() -> None:
    with pytest.raises(ValueError):
        Budget(0, 1000)

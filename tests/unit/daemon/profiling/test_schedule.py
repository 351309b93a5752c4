"""The schedule: moments and trace ids from the job id and the wall clock only, the same on every host."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dyno.daemon.profiling.schedule import (
    MAX_JOB_PART,
    Schedule,
    job_offset_ms,
    periodic_trace_id,
    trace_id_job_part,
)
from dyno.trace_ids import is_trace_id
from dyno.trace_summary import PERIODIC_PREFIX

pytestmark = pytest.mark.unit

NOW = 1_795_000_000_123  # 2026-11-18T11:06:40.123Z
HOUR = 3_600_000


def test_two_hosts_pick_the_same_moment_and_trace_id() -> None:
    a, b = Schedule(1_800_000), Schedule(1_800_000)  # two "hosts": two objects, same job id and clock
    for now in (NOW, NOW + 17, NOW + 999_999):
        assert a.moment_at_or_before("job-42", now) == b.moment_at_or_before("job-42", now)
        m = a.moment_at_or_before("job-42", now)
        assert a.trace_id("job-42", m) == b.trace_id("job-42", m)


def test_moments_are_interval_apart_at_the_jobs_offset() -> None:
    s = Schedule(60_000)
    m = s.moment_at_or_before("J", NOW)
    assert m <= NOW < m + 60_000
    assert m % 60_000 == s.offset_ms("J") == job_offset_ms("J", 60_000)
    assert s.next_moment("J", NOW) == m + 60_000
    assert s.moment_at_or_before("J", m) == m  # a moment is its own latest moment
    assert s.moment_at_or_before("J", m - 1) == m - 60_000


def test_offsets_differ_per_job_and_spread_over_the_interval() -> None:
    offsets = {job_offset_ms(f"job-{i}", HOUR) for i in range(200)}
    assert len(offsets) > 190  # jitter: jobs do not all trace at once
    assert min(offsets) < HOUR / 10 and max(offsets) > HOUR * 9 / 10
    assert all(0 <= o < HOUR for o in offsets)


def test_offset_is_stable_across_interpreters() -> None:
    # not Python's hash(): PYTHONHASHSEED differs per process, and hosts must agree
    code = "from dyno.daemon.profiling.schedule import job_offset_ms; print(job_offset_ms('job-42', 3600000))"
    outs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONHASHSEED": seed}, check=True
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert outs == {str(job_offset_ms("job-42", HOUR))}


def test_trace_id_names_the_job_and_the_utc_moment() -> None:
    m = 1_795_000_000_000  # 2026-11-18T11:06:40Z
    assert periodic_trace_id("train-7", m) == "periodic-train-7-20261118T110640Z"
    assert periodic_trace_id("train-7", m + 999) == periodic_trace_id("train-7", m)
    assert periodic_trace_id("train-7", m).startswith(PERIODIC_PREFIX)


@pytest.mark.parametrize(
    "job",
    ["a b/c", "x" * 200, "ü-job", "...", "job\nwith newline", "a" * (MAX_JOB_PART + 1), "../../etc"],
)
def test_any_job_id_maps_to_a_valid_deterministic_trace_id(job: str) -> None:
    tid = periodic_trace_id(job, NOW)
    assert is_trace_id(tid) and len(tid) <= 64
    assert tid == periodic_trace_id(job, NOW)
    assert trace_id_job_part(job) != job


def test_job_ids_that_sanitise_alike_still_differ() -> None:
    assert trace_id_job_part("a b") != trace_id_job_part("a/b")
    assert trace_id_job_part("a_b") == "a_b"  # a valid one is kept as it is
    assert trace_id_job_part("x" * MAX_JOB_PART) == "x" * MAX_JOB_PART


def test_interval_below_a_second_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1000 ms"):
        Schedule(999)

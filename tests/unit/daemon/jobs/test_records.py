"""JobBook: per-job totals accumulated tick by tick, shared GPUs, GPM coverage, the grace period."""

from __future__ import annotations

import pytest

from dyno.daemon.jobs.attribution import JobIdentity, Source
from dyno.daemon.jobs.records import MAX_LISTED, GpuTick, JobBook, JobRecord, Observation, ProcTick

A = JobIdentity("a", "alice", Source.REGISTERED, 10)
B = JobIdentity("b", "bob", Source.ENVIRON)


def tick(
    ms: int,
    procs: list[ProcTick],
    util: float = 50.0,
    sm: float | None = None,
    dt: float = 1.0,
    memory: dict[int, int] | None = None,
) -> Observation:
    gpus = {i: GpuTick(i, utilization_percent=util, sm_active_percent=sm, power_watts=300.0) for i in range(4)}
    return Observation(ms, dt, gpus, tuple(procs), gpu_memory=memory or {})


def one(book: JobBook, job_id: str) -> JobRecord:
    (rec,) = [r for r in book.records() if r.job_id == job_id]
    return rec


def test_gpu_seconds_busy_energy_memory_cpu_and_ranks_accumulate() -> None:
    book = JobBook("h", grace_s=10)
    for s in range(3):
        book.observe(
            tick(
                1000 * s,
                [
                    ProcTick(10, A, gpus=(0,), cpu_seconds=0.5, rank=0),
                    ProcTick(11, A, gpus=(1,), cpu_seconds=0.25, rank=1),
                    ProcTick(12, A, cpu_seconds=0.25),  # a DataLoader worker: CPU, no GPU
                ],
                memory={10: 100 + s, 11: 200},
            )
        )
    r = one(book, "a")
    assert r.gpu_seconds == pytest.approx(6.0)
    assert r.busy_gpu_seconds == pytest.approx(3.0)
    assert r.energy_joules == pytest.approx(6 * 300.0)
    assert r.cpu_seconds == pytest.approx(3.0)
    assert r.gpu_memory_max_bytes == 302
    assert (r.gpus_held, r.gpus_max, r.gpu_indices, r.ranks, r.pids, r.pid_count) == (
        2,
        2,
        (0, 1),
        (0, 1),
        (10, 11, 12),
        3,
    )
    assert (r.first_seen_ms, r.last_seen_ms, r.running, r.user, r.source) == (0, 2000, True, "alice", "registered")
    assert r.sm_active_gpu_seconds == 0 and r.gpm_gpu_seconds == 0  # no GPM on these GPUs


def test_a_gpu_held_by_two_jobs_is_shared_and_gpm_is_counted_where_present() -> None:
    book = JobBook("h", grace_s=10)
    book.observe(tick(0, [ProcTick(10, A, gpus=(0,)), ProcTick(20, B, gpus=(0, 1))], util=100.0, sm=40.0))
    a, b = one(book, "a"), one(book, "b")
    assert a.gpu_seconds == pytest.approx(0.5)
    assert b.gpu_seconds == pytest.approx(1.5)
    assert a.gpu_seconds + b.gpu_seconds == pytest.approx(2.0)  # never more than the GPUs' wall time
    assert b.sm_active_gpu_seconds == pytest.approx(0.6)
    assert b.gpm_gpu_seconds == pytest.approx(b.gpu_seconds)


def test_a_job_ends_after_the_grace_period_without_its_processes() -> None:
    book = JobBook("h", grace_s=5)
    assert book.observe(tick(0, [ProcTick(10, A, gpus=(0,))])) == []
    assert book.observe(tick(3000, [])) == []
    assert one(book, "a").gpus_held == 0  # not seen this tick
    assert book.observe(tick(5000, [])) == []
    (ended,) = book.observe(tick(5001, []))
    assert (ended.job_id, ended.running, ended.last_seen_ms, ended.gpu_seconds) == ("a", False, 0, 1.0)
    assert book.records() == ()


def test_resumed_record_goes_on_from_its_totals() -> None:
    book = JobBook("h", grace_s=5)
    stored = JobRecord("a", "alice", "h", 0, 1000, True, gpu_seconds=100.0, pids=(10,), pid_count=1, record_id=7)
    book.resume([stored])
    book.observe(tick(2000, [ProcTick(10, A, gpus=(0,))]))
    r = one(book, "a")
    assert (r.gpu_seconds, r.first_seen_ms, r.record_id, r.pid_count) == (101.0, 0, 7, 1)


def test_gpu_holders_are_the_jobs_holding_each_gpu_at_the_last_tick() -> None:
    book = JobBook("h", grace_s=10)
    assert book.gpu_holders() == {}
    book.observe(tick(0, [ProcTick(10, A, gpus=(0, 1)), ProcTick(20, B, gpus=(0,)), ProcTick(21, B)]))
    assert book.gpu_holders() == {0: ("a", "b"), 1: ("a",)}
    book.observe(tick(1000, [ProcTick(20, B, gpus=(2,))]))
    assert book.gpu_holders() == {2: ("b",)}  # the last tick's: a GPU no longer held is no one's


def test_the_same_processes_again_add_time_and_memory_but_not_pids() -> None:
    book = JobBook("h", grace_s=10)
    procs = [ProcTick(10, A, gpus=(0,), rank=0), ProcTick(11, A, gpus=(1,), rank=1)]
    first = tick(0, procs, memory={10: 100, 11: 100})
    book.observe(first)
    # the Observer hands over its last tuple again while nothing changed; the memory is each tick's own
    book.observe(Observation(1000, 1.0, first.gpus, first.procs, gpu_memory={10: 300, 11: 100}))
    r = one(book, "a")
    assert (r.gpu_seconds, r.gpu_memory_max_bytes, r.pids, r.pid_count, r.ranks) == (4.0, 400, (10, 11), 2, (0, 1))
    assert book.gpu_holders() == {0: ("a",), 1: ("a",)}


def test_a_record_id_shows_at_once() -> None:
    book = JobBook("h", grace_s=10)
    book.observe(tick(0, [ProcTick(10, A, gpus=(0,))]))
    assert one(book, "a").record_id == 0
    book.set_record_id(("a", "alice"), 7)
    assert one(book, "a").record_id == 7


def test_a_job_of_more_processes_than_listed_counts_each_once() -> None:
    book = JobBook("h", grace_s=10)
    for t in range(3):  # the same 70 processes, built anew each tick (as at each CPU reading)
        book.observe(tick(1000 * t, [ProcTick(1000 + i, A) for i in range(70)]))
    r = one(book, "a")
    assert (len(r.pids), r.pid_count) == (MAX_LISTED, 70)

"""JobAccounting as dynod runs it: ticks of simulated GPUs holding registered trainers, flushes, a restart that
resumes the running record, a database that cannot be used."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from job_proc_tree import ProcTree

from dyno.daemon.history import Sample
from dyno.daemon.jobs.accounting import AccountingConfig, JobAccounting
from dyno.daemon.jobs.attribution import UNATTRIBUTED, user_name
from dyno.daemon.jobs.observe import CHILDREN_EVERY_S, CPU_EVERY_S, Trainer
from dyno.daemon.jobs.store import JobQuery
from dyno.daemon.samplers import gpu_metrics as gm
from dyno.daemon.samplers.base import GpuProcess, Reading
from dyno.daemon.samplers.gpu_sim import SimGpuSampler

ME = user_name(os.getuid())


class Clocks:
    def __init__(self) -> None:
        self.ms = 1_000_000
        self.mono = 0.0

    def advance(self, s: float) -> None:
        self.ms += int(s * 1000)
        self.mono += s


def accounting(
    state: Path, tree: ProcTree, clocks: Clocks, trainers: list[Trainer], sim: SimGpuSampler, cpu_every_s: float = 1.0
) -> JobAccounting:
    """Accounting of 4 simulated GPUs; CPU read every tick unless told (dynod's pace is CPU_EVERY_S)."""
    config = AccountingConfig(
        state_dir=state, hostname="h", interval_s=1.0, flush_s=10.0, grace_s=5.0, sim_gpus=4, cpu_every_s=cpu_every_s
    )
    acc = JobAccounting(
        config,
        lambda: trainers,
        list,
        proc=tree.reader(),
        set_sim_loads=sim.hold_loads,
        clock_ms=lambda: clocks.ms,
        monotonic=lambda: clocks.mono,
    )
    acc.start()
    return acc


def run(
    acc: JobAccounting, sim: SimGpuSampler, clocks: Clocks, tree: ProcTree, seconds: int, cpu: dict[int, int]
) -> None:
    """`seconds` ticks; each pid in `cpu` uses that many CPU ticks (1/100 s) per second."""
    for _ in range(seconds):
        clocks.advance(1.0)
        for pid, per_s in cpu.items():
            used = int((tree.root / str(pid) / "stat").read_text().split(") ")[1].split()[11])
            tree.set_cpu(pid, used + per_s)
        acc.on_tick(Sample(clocks.ms, tuple(sim.sample())))


@pytest.fixture
def tree(tmp_path: Path) -> ProcTree:
    t = ProcTree(tmp_path / "proc")
    t.add(100, children=(101,))
    t.add(101, ppid=100)  # its DataLoader worker
    t.add(200)
    return t


def test_sim_gpus_hold_trainers_by_local_rank_and_follow_their_cpu_share(tmp_path: Path, tree: ProcTree) -> None:
    clocks, sim = Clocks(), SimGpuSampler(4)
    trainers = [Trainer(100, "fast", os.getuid(), rank=0, local_rank=2), Trainer(200, "starved", os.getuid())]
    acc = accounting(tmp_path / "state", tree, clocks, trainers, sim)
    run(acc, sim, clocks, tree, 11, {100: 90, 101: 50, 200: 10})
    recs = {r.job_id: r for r in acc.book.records()}
    fast, starved = recs["fast"], recs["starved"]
    assert fast.gpu_indices == (2,) and starved.gpu_indices == (0,)  # LOCAL_RANK 2; round-robin from 0
    assert fast.gpu_seconds == pytest.approx(11.0)
    # the GPU's load is the trainer's own CPU share of the tick before (the first two ticks': the sim's wave)
    assert fast.busy_gpu_seconds / fast.gpu_seconds > 0.7
    assert starved.busy_gpu_seconds / starved.gpu_seconds < 0.3
    assert fast.cpu_seconds == pytest.approx(10 * 1.4)  # the trainer and its worker, from the second tick
    assert (fast.pids, fast.ranks, fast.simulated, fast.user) == ((100, 101), (0,), True, ME)
    listed, after = acc.list(JobQuery(), 0, 10)
    assert after == 0 and {r.job_id for r in listed} == {"fast", "starved"}
    assert all(r.record_id for r in listed)  # flushed at 10 s


def test_a_restart_resumes_the_running_record_losing_at_most_one_flush(tmp_path: Path, tree: ProcTree) -> None:
    clocks, sim = Clocks(), SimGpuSampler(4)
    trainers = [Trainer(100, "j", os.getuid(), local_rank=0)]
    first = accounting(tmp_path / "state", tree, clocks, trainers, sim)
    run(first, sim, clocks, tree, 25, {100: 50})  # flushed at 10 s and 20 s; then killed: no stop()
    (before,) = first.book.records()
    second = accounting(tmp_path / "state", tree, clocks, trainers, sim)
    (resumed,) = second.book.records()
    assert resumed.record_id == before.record_id
    assert before.gpu_seconds - resumed.gpu_seconds <= 10.0  # one flush interval
    assert resumed.gpu_seconds >= 20.0
    run(second, sim, clocks, tree, 3, {100: 50})
    second.stop()
    rows, _ = second.list(JobQuery(), 0, 10)
    assert len(rows) == 1 and rows[0].gpu_seconds == pytest.approx(resumed.gpu_seconds + 3.0)
    assert rows[0].running  # stopped with its job still running: the next dynod resumes it


def test_ended_job_is_written_at_once(tmp_path: Path, tree: ProcTree) -> None:
    clocks, sim = Clocks(), SimGpuSampler(4)
    trainers = [Trainer(100, "short", os.getuid())]
    acc = accounting(tmp_path / "state", tree, clocks, trainers, sim)
    run(acc, sim, clocks, tree, 2, {100: 50})
    trainers.clear()
    tree.remove(100)
    tree.remove(101)
    run(acc, sim, clocks, tree, 6, {})
    rows, _ = acc.list(JobQuery(job_id="short"), 0, 10)
    assert [(r.running, r.record_id > 0) for r in rows] == [(False, True)]


def test_a_corrupt_database_keeps_accounting_in_memory_and_says_so_once(
    tmp_path: Path, tree: ProcTree, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "jobs.sqlite3").write_bytes(b"garbage" * 1000)
    clocks, sim = Clocks(), SimGpuSampler(4)
    with caplog.at_level(logging.ERROR):
        acc = accounting(state, tree, clocks, [Trainer(100, "j", os.getuid())], sim)
        run(acc, sim, clocks, tree, 25, {100: 50})
    assert "corrupt" in acc.problem()
    assert len([r for r in caplog.records if "job database" in r.getMessage()]) == 1
    rows, after = acc.list(JobQuery(), 0, 10)
    assert [r.job_id for r in rows] == ["j"] and rows[0].gpu_seconds == pytest.approx(25.0) and after == 0


def test_a_state_dir_that_cannot_be_created_is_a_problem_not_a_crash(tmp_path: Path, tree: ProcTree) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    clocks, sim = Clocks(), SimGpuSampler(4)
    acc = accounting(blocker / "state", tree, clocks, [Trainer(100, "j", os.getuid())], sim)
    run(acc, sim, clocks, tree, 3, {100: 50})
    assert "job database" in acc.problem()
    assert [r.job_id for r in acc.list(JobQuery(), 0, 10)[0]] == ["j"]
    acc.stop()


def test_readings_without_gpu_labels_are_ignored(tmp_path: Path, tree: ProcTree) -> None:
    clocks, sim = Clocks(), SimGpuSampler(4)
    acc = accounting(tmp_path / "state", tree, clocks, [], sim)
    acc.on_tick(Sample(clocks.ms, (Reading("gpu_utilization_percent", 5.0, ()),)))
    assert acc.book.records() == ()


def test_traces_started_for_a_trainer_count_for_its_job(tmp_path: Path, tree: ProcTree) -> None:
    clocks, sim = Clocks(), SimGpuSampler(4)
    acc = accounting(tmp_path / "state", tree, clocks, [Trainer(100, "j", os.getuid())], sim)
    run(acc, sim, clocks, tree, 1, {100: 10})
    acc.trace_taken([100, 101])  # the trainer and its worker: one trace of the job
    acc.trace_taken([100])
    acc.trace_taken([999])  # no process of any job
    run(acc, sim, clocks, tree, 1, {100: 10})
    (rec,) = acc.book.records()
    assert rec.traces == 2


def test_a_full_disk_is_a_problem_and_accounting_goes_on(tmp_path: Path, tree: ProcTree) -> None:
    clocks, sim = Clocks(), SimGpuSampler(4)
    trainers = [Trainer(100, "j", os.getuid())]
    acc = accounting(tmp_path / "state", tree, clocks, trainers, sim)
    run(acc, sim, clocks, tree, 11, {100: 10})  # flushed once
    assert acc.problem() == ""
    store = acc._store
    assert store is not None
    # SQLite's own "disk full": no page may be added past the file's current size
    pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count = {pages}")
    for i in range(300):
        tree.add(1000 + i, env={"DYNO_JOB_ID": f"other-{i}-" + "x" * 100})
        trainers.append(Trainer(1000 + i, f"other-{i}-" + "x" * 100, os.getuid()))
    run(acc, sim, clocks, tree, 11, {100: 10})
    assert "full" in acc.problem()
    run(acc, sim, clocks, tree, 2, {100: 10})  # sampling goes on
    rows, _ = acc.list(JobQuery(job_id="j"), 0, 10)  # from memory: the values of the last tick
    assert rows and rows[0].last_seen_ms == clocks.ms and rows[0].gpu_seconds > 11.0


def test_nvml_process_lists_attribute_gpus_to_registered_environ_and_unattributed_jobs(
    tmp_path: Path, tree: ProcTree
) -> None:
    """Real GPUs: who holds which GPU comes from NVML's process lists, not from placement."""
    tree.add(300, env={"SLURM_ARRAY_JOB_ID": "36199", "SLURM_ARRAY_TASK_ID": "4"})
    tree.add(400)
    clocks = Clocks()
    holders = [
        GpuProcess(pid=101, gpu_index=0, used_memory_bytes=1 << 30),  # the trainer's DataLoader worker
        GpuProcess(pid=300, gpu_index=1, used_memory_bytes=2 << 30),
        GpuProcess(pid=300, gpu_index=2, used_memory_bytes=2 << 30),
        GpuProcess(pid=400, gpu_index=3, used_memory_bytes=3 << 30),
    ]
    acc = JobAccounting(
        AccountingConfig(state_dir=tmp_path / "state", hostname="h", interval_s=1.0),
        lambda: [Trainer(100, "registered-job", os.getuid())],
        lambda: holders,
        proc=tree.reader(),
        clock_ms=lambda: clocks.ms,
        monotonic=lambda: clocks.mono,
    )
    acc.start()
    for _ in range(4):
        clocks.advance(1.0)
        readings = [
            Reading(name, value, (("gpu", str(i)), ("uuid", f"GPU-{i}")))
            for i in range(4)
            for name, value in (("gpu_utilization_percent", 25.0 * i), ("gpu_power_watts", 100.0))
        ]
        acc.on_tick(Sample(clocks.ms, tuple(readings)))
    recs = {r.job_id: r for r in acc.book.records()}
    assert set(recs) == {"registered-job", "36199_4", UNATTRIBUTED}
    reg, array, nobody = recs["registered-job"], recs["36199_4"], recs[UNATTRIBUTED]
    assert (reg.gpu_indices, reg.gpu_seconds, reg.busy_gpu_seconds) == ((0,), 4.0, 0.0)
    assert (array.gpu_indices, array.gpu_seconds, array.source) == ((1, 2), 8.0, "environ")
    assert array.busy_gpu_seconds == pytest.approx(4 * (0.25 + 0.5)) and array.gpu_memory_max_bytes == 4 << 30
    assert (nobody.gpu_indices, nobody.busy_gpu_seconds, nobody.user) == ((3,), 3.0, ME)
    assert nobody.energy_joules == pytest.approx(400.0) and not nobody.simulated


def test_a_new_dataloader_worker_is_found_at_the_next_listing_of_children(tmp_path: Path, tree: ProcTree) -> None:
    clocks, sim = Clocks(), SimGpuSampler(4)
    acc = accounting(tmp_path / "state", tree, clocks, [Trainer(100, "j", os.getuid())], sim)
    run(acc, sim, clocks, tree, 2, {100: 10})
    tree.add(102, ppid=100)
    (tree.root / "100" / "task" / "100" / "children").write_text("101 102")
    run(acc, sim, clocks, tree, 2, {100: 10})
    assert acc.book.records()[0].pids == (100, 101)  # listed again every CHILDREN_EVERY_S, not every tick
    run(acc, sim, clocks, tree, int(CHILDREN_EVERY_S), {100: 10})
    assert acc.book.records()[0].pids == (100, 101, 102)


def test_cpu_read_at_dynods_pace_adds_up_to_the_same_totals(tmp_path: Path, tree: ProcTree) -> None:
    clocks, sim = Clocks(), SimGpuSampler(4)
    trainers = [Trainer(100, "j", os.getuid())]
    acc = accounting(tmp_path / "state", tree, clocks, trainers, sim, cpu_every_s=CPU_EVERY_S)
    reads = []
    stat = acc._observer._proc.stat  # count the /proc stat reads

    def counting(pid: int) -> tuple[int, int, float] | None:
        reads.append(pid)
        return stat(pid)

    acc._observer._proc.stat = counting  # type: ignore[method-assign]
    run(acc, sim, clocks, tree, 21, {100: 30, 101: 10})
    (rec,) = acc.book.records()
    assert rec.cpu_seconds == pytest.approx(20 * 0.4)  # every second's CPU after the first reading
    assert len(reads) == 2 * (1 + 20 // int(CPU_EVERY_S))  # two processes, read every CPU_EVERY_S only


def test_between_cpu_readings_the_processes_are_handed_over_again_not_attributed_again(
    tmp_path: Path, tree: ProcTree
) -> None:
    clocks, sim = Clocks(), SimGpuSampler(4)
    trainers = [Trainer(100, "j", os.getuid(), local_rank=0)]
    acc = accounting(tmp_path / "state", tree, clocks, trainers, sim, cpu_every_s=CPU_EVERY_S)
    resolved = []
    resolve = acc._observer._attributor.resolve

    def counting(pid: int, *args: object) -> object:
        resolved.append(pid)
        return resolve(pid, *args)  # type: ignore[arg-type]

    acc._observer._attributor.resolve = counting  # type: ignore[method-assign]
    memory = []
    for _ in range(21):
        clocks.advance(1.0)
        sample = Sample(clocks.ms, tuple(sim.sample()))
        memory += [r.value for r in sample.readings if r.name == gm.MEMORY_USED and ("gpu", "0") in r.labels]
        acc.on_tick(sample)
    readings = 1 + 20 // int(CPU_EVERY_S)  # ticks 1, 6, 11, 16, 21
    # the two processes (the trainer and its worker) are built at each CPU reading and at the tick after it (without
    # CPU time); that tuple is handed over again until the next reading. Every tick: 2 x 21.
    assert len(resolved) == 2 * (2 * readings - 1)
    (rec,) = acc.book.records()
    assert rec.gpu_seconds == pytest.approx(21.0) and rec.pids == (100, 101) and rec.pid_count == 2
    assert len(set(memory)) > 1 and rec.gpu_memory_max_bytes == int(max(memory))  # memory followed every tick
    trainers.append(Trainer(200, "k", os.getuid(), local_rank=1))  # a change is seen at the next tick
    clocks.advance(1.0)
    acc.on_tick(Sample(clocks.ms, tuple(sim.sample())))
    assert {r.job_id for r in acc.book.records()} == {"j", "k"}

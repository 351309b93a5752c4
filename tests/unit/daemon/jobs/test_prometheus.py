"""The job series dynod exports: names, labels (job_id and user, never job), the minutes after a job's end, the cap
on exported jobs; read back with prometheus_client's text parser."""

from __future__ import annotations

import os
from pathlib import Path

from job_proc_tree import ProcTree
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dyno.daemon.history import Sample
from dyno.daemon.jobs.accounting import AccountingConfig, JobAccounting
from dyno.daemon.jobs.observe import Trainer
from dyno.daemon.jobs.prometheus import (
    EXPORT_ENDED_S,
    JOB_COUNTERS,
    JOB_GAUGES,
    MAX_EXPORTED_JOBS,
    exported,
    job_families,
)
from dyno.daemon.jobs.records import JobRecord
from dyno.daemon.samplers.gpu_sim import SimGpuSampler


def _parse(records: list[JobRecord]) -> dict[str, list[tuple[dict[str, str], float]]]:
    class Fixed:
        def collect(self):  # type: ignore[no-untyped-def]
            return job_families("node1", records)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed())  # type: ignore[arg-type]
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            if not s.name.endswith("_created"):
                out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_every_job_series_with_job_id_user_and_host_labels() -> None:
    rec = JobRecord(
        "36199_0",
        "alice",
        "node1",
        1_700_000_000_000,
        1_700_000_060_000,
        True,
        gpus_held=2,
        gpu_seconds=120.0,
        busy_gpu_seconds=60.0,
        energy_joules=9e4,
    )
    served = _parse([rec])
    names = {f"dyno_{n}_total" for n in JOB_COUNTERS} | {f"dyno_{n}" for n in JOB_GAUGES}
    assert set(served) == names
    for samples in served.values():
        ((labels, _),) = samples
        assert labels == {"host": "node1", "job_id": "36199_0", "user": "alice"}
    assert served["dyno_job_gpu_seconds_total"][0][1] == 120.0
    assert served["dyno_job_gpu_busy_seconds_total"][0][1] == 60.0
    assert served["dyno_job_gpus_held"][0][1] == 2.0
    assert served["dyno_job_start_timestamp_seconds"][0][1] == 1_700_000_000.0
    sim = _parse([JobRecord("j", "u", "node1", 0, 0, True, simulated=True)])
    assert sim["dyno_job_gpus_held"][0][0]["simulated"] == "true"


def test_the_cap_keeps_running_jobs_first_most_gpu_seconds_first() -> None:
    running = [JobRecord(f"r{i}", "u", "h", 0, 0, True, gpu_seconds=float(i)) for i in range(MAX_EXPORTED_JOBS)]
    ended = [JobRecord("e", "u", "h", 0, 0, False, gpu_seconds=1e9)]
    chosen = exported(running, ended)
    assert len(chosen) == MAX_EXPORTED_JOBS and "e" not in {r.job_id for r in chosen}
    assert chosen[0].job_id == f"r{MAX_EXPORTED_JOBS - 1}"


def test_an_ended_job_is_exported_for_a_few_minutes_then_dropped(tmp_path: Path) -> None:
    tree = ProcTree(tmp_path / "proc")
    tree.add(100)
    now = {"ms": 1_000_000, "mono": 0.0}
    trainers = [Trainer(100, "short", os.getuid())]
    sim = SimGpuSampler(2)
    acc = JobAccounting(
        AccountingConfig(state_dir=tmp_path / "state", hostname="h", grace_s=2.0, sim_gpus=2),
        lambda: trainers,
        list,
        proc=tree.reader(),
        clock_ms=lambda: int(now["ms"]),
        monotonic=lambda: now["mono"],
    )
    acc.start()

    def tick() -> None:
        now["ms"] += 1000
        now["mono"] += 1.0
        acc.on_tick(Sample(int(now["ms"]), tuple(sim.sample())))

    tick()
    trainers.clear()
    for _ in range(4):
        tick()
    (ended,) = acc.exported_records()
    assert (ended.job_id, ended.running) == ("short", False)
    now["mono"] += EXPORT_ENDED_S
    assert acc.exported_records() == []

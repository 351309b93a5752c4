"""Which job a process is accounted to: registered trainer, its children, environment, cgroup, unattributed."""

from __future__ import annotations

import os
from pathlib import Path

from job_proc_tree import ProcTree

from dyno.daemon.jobs.attribution import (
    MAX_JOB_ID_LEN,
    UNATTRIBUTED,
    Attributor,
    Source,
    job_from_cgroup,
    job_from_environ,
    user_name,
)


def test_environ_order_dyno_then_slurm_array_then_slurm_then_torchelastic() -> None:
    assert job_from_environ({"DYNO_JOB_ID": "d1", "SLURM_JOB_ID": "7"}) == "d1"
    assert job_from_environ({"SLURM_ARRAY_JOB_ID": "36199", "SLURM_ARRAY_TASK_ID": "3", "SLURM_JOB_ID": "36202"}) == (
        "36199_3"
    )
    assert job_from_environ({"SLURM_JOB_ID": "7", "TORCHELASTIC_RUN_ID": "r"}) == "7"
    assert job_from_environ({"TORCHELASTIC_RUN_ID": "run-5"}) == "run-5"
    assert job_from_environ({"PATH": "/bin"}) is None
    assert job_from_environ({"DYNO_JOB_ID": "x" * 1000}) == "x" * MAX_JOB_ID_LEN


def test_cgroup_slurm_v1_v2_and_kubernetes_pod() -> None:
    assert job_from_cgroup("0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n") == "4242"
    assert job_from_cgroup("4:cpuset:/slurm/uid_1000/job_77/step_batch\n") == "77"
    pod = (
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b3c4d_5e6f_7a8b_9c0d_112233445566.slice/x"
    )
    assert job_from_cgroup(pod) == "k8s-pod-1a2b3c4d-5e6f-7a8b-9c0d-112233445566"
    assert job_from_cgroup("0::/user.slice/user-1000.slice/session-3.scope\n") is None


def test_registered_trainer_and_its_dataloader_worker_count_for_its_job(tmp_path: Path) -> None:
    tree = ProcTree(tmp_path / "proc")
    tree.add(100, env={"SLURM_JOB_ID": "999"})
    tree.add(101, ppid=100, env={"SLURM_JOB_ID": "999"})
    a = Attributor(tree.reader())
    reg = {100: ("job-a", os.getuid())}
    trainer = a.resolve(100, reg)
    assert (trainer.job_id, trainer.source, trainer.trainer_pid) == ("job-a", Source.REGISTERED, 100)
    worker = a.resolve(101, reg)
    assert (worker.job_id, worker.source, worker.trainer_pid) == ("job-a", Source.REGISTERED, 100)
    assert worker.user == user_name(os.getuid())
    # the trainer gone from the registry: the worker falls back to its own environment
    assert a.resolve(101, {}).job_id == "999"


def test_unregistered_process_by_environ_then_cgroup_else_unattributed(tmp_path: Path) -> None:
    tree = ProcTree(tmp_path / "proc")
    tree.add(200, env={"TORCHELASTIC_RUN_ID": "elastic-1"})
    tree.add(201, cgroup="0::/slurm/uid_0/job_31/step_0\n")
    tree.add(202)
    a = Attributor(tree.reader())
    assert (a.resolve(200, {}).job_id, a.resolve(200, {}).source) == ("elastic-1", Source.ENVIRON)
    assert (a.resolve(201, {}).job_id, a.resolve(201, {}).source) == ("31", Source.CGROUP)
    nobody = a.resolve(202, {})
    assert (nobody.job_id, nobody.source) == (UNATTRIBUTED, Source.NONE)
    assert nobody.user == user_name(os.getuid())
    gone = a.resolve(203, {})  # exited between NVML's list and the read
    assert (gone.job_id, gone.user) == (UNATTRIBUTED, "unknown")

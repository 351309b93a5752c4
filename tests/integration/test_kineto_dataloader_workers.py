"""A KINETO_USE_DAEMON=1 torch.multiprocessing.spawn trainer whose DataLoader has a spawn-started worker: all three
processes (the launcher that waits, the trainer, the DataLoader worker) register with a real dynod as kineto
processes, and `dyno-cli trace --process-limit 1` traces the trainer, not the idle-looking leaf worker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kineto_daemon import kineto_daemon

pytest.importorskip("torch")
pytestmark = [pytest.mark.integration, pytest.mark.torch]


def test_process_limit_traces_the_spawn_trainer_not_its_dataloader_worker(tmp_path: Path) -> None:
    with kineto_daemon() as k:
        job = k.new_job()
        # "worker <pid> loader <pid>" once the trainer got its first batch (the loader runs its loop)
        launcher, line = k.start_trainer(
            "spawn_trainer.py", "--seconds", "120", job=job, ready=lambda s: s.startswith("worker ")
        )
        worker, loader = int(line.split()[1]), int(line.split()[3])
        pids = {p.pid: p for p in k.registered(job, 3)}
        assert set(pids) == {launcher.pid, worker, loader}, pids  # the DataLoader worker registers too
        assert worker in pids[loader].ancestry  # so by ancestry alone it is the only leaf
        assert Path(f"/proc/{loader}/comm").read_text().strip() == "pt_data_worker"
        res = k.trace(tmp_path, "--job-id", job, "--process-limit", "1", "--duration-ms", "300", "--start-delay-s", "0")
        assert res.returncode == 0, res.stdout + res.stderr
        (proc,) = json.loads(res.stdout)["processes"]
        assert proc["pid"] == worker and proc["state"] == "done"
        with open(proc["path"]) as f:
            events = json.load(f)["traceEvents"]
        assert any(e.get("name", "").startswith("Optimizer.step") for e in events)  # the trainer's work

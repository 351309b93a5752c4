"""A KINETO_USE_DAEMON=1 torch.multiprocessing.spawn trainer whose DataLoader has a spawn-started worker: all three
processes (the launcher that waits, the trainer, the DataLoader worker) register with a real dynod as kineto
processes, and `dyno-cli trace --process-limit 1` traces the trainer, not the idle-looking leaf worker."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from dyno.client.client import DynoClient
from dyno.job_ids import JOB_ID_VARIABLES

from conftest import Dynod, run_cli, short_tmpdir, wait_for

pytest.importorskip("torch")
pytestmark = [pytest.mark.integration, pytest.mark.torch]

SPAWN_TRAINER = Path(__file__).resolve().parent / "trainers" / "spawn_trainer.py"


def test_process_limit_traces_the_spawn_trainer_not_its_dataloader_worker(tmp_path: Path) -> None:
    base = short_tmpdir("dyno-kdw-")
    kineto_dir = base / "k"
    (base / "kineto.conf").write_text("ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n")
    daemon = Dynod(["--kineto-socket-dir", str(kineto_dir)], gpu_backend="none", metrics=False)
    job = str(5_000_000 + uuid.uuid4().int % 1_000_000)
    env = {k: v for k, v in os.environ.items() if k not in JOB_ID_VARIABLES}
    env.update(
        {
            "KINETO_USE_DAEMON": "1",
            "KINETO_IPC_SOCKET_DIR": str(kineto_dir),
            "KINETO_CONFIG": str(base / "kineto.conf"),
            "SLURM_JOB_ID": job,
        }
    )
    trainer: subprocess.Popen[str] | None = None
    try:
        daemon.start()
        trainer = subprocess.Popen(
            [sys.executable, str(SPAWN_TRAINER), "--seconds", "120"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        assert trainer.stdout is not None
        line = next(line for line in trainer.stdout if line.startswith("worker "))  # both run; the loader loops
        _, worker, _, loader = line.split()
        threading.Thread(target=trainer.stdout.read, daemon=True).start()  # keep draining
        with DynoClient(daemon.target, timeout_s=5) as c:
            procs = wait_for(
                lambda: (lambda ps: ps if len(ps) >= 3 else None)(list(c.list_processes(job).processes)), 60, 0.2
            )
        pids = {p.pid: p for p in procs}
        assert set(pids) == {trainer.pid, int(worker), int(loader)}, pids  # the DataLoader worker registers too
        assert int(worker) in pids[int(loader)].ancestry  # so it is the only leaf by ancestry
        assert Path(f"/proc/{loader}/comm").read_text().strip() == "pt_data_worker"
        res = run_cli(
            "trace",
            "--port",
            str(daemon.port),
            "--host",
            "127.0.0.1",
            "--job-id",
            job,
            "--process-limit",
            "1",
            "--duration-ms",
            "300",
            "--start-delay-s",
            "0",
            "--output-dir",
            str(tmp_path),
            "--json",
            "--no-analyze",
            timeout=120,
        )
        assert res.returncode == 0, res.stdout + res.stderr
        (proc,) = json.loads(res.stdout)["processes"]
        assert proc["pid"] == int(worker) and proc["state"] == "done"
        with open(proc["path"]) as f:
            events = json.load(f)["traceEvents"]
        assert any(e.get("name", "").startswith("Optimizer.step") for e in events)  # the trainer's work
    finally:
        if trainer is not None and trainer.poll() is None:
            os.killpg(trainer.pid, signal.SIGKILL)
            trainer.wait()
        daemon.stop()
        daemon.cleanup()
        shutil.rmtree(base, ignore_errors=True)

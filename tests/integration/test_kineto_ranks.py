"""A `KINETO_USE_DAEMON=1` trainer's rank, local rank and world size come from its environment (RANK, LOCAL_RANK,
WORLD_SIZE, as torchrun sets them), read by dynod with its job id: libkineto sends none, so every kineto process showed
rank "-" in `dyno-cli ps` and the trace tables (and null in manifest.json) while the agent's showed theirs. A real
dynod and a real torch process with libkineto's daemon mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kineto_daemon import kineto_daemon

from conftest import run_cli

pytest.importorskip("torch")
pytestmark = [pytest.mark.integration, pytest.mark.torch]

_TRAINER = "import time, torch\nprint('ready', flush=True)\ntime.sleep(120)\n"


def test_kineto_processes_register_their_ranks(tmp_path: Path) -> None:
    script = tmp_path / "idle_trainer.py"
    script.write_text(_TRAINER)
    with kineto_daemon() as k:
        job = k.new_job()
        # started at once, then waited for
        ranked = k.spawn_trainer(script, job=job, env_extra={"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"})
        plain = k.spawn_trainer(script, job=job, env_extra={"RANK": "x"})
        for proc in (ranked, plain):
            k.wait_ready(proc, lambda line: "ready" in line)
        k.registered(job, 2)
        out = run_cli("ps", "--port", str(k.daemon.port), "--host", "127.0.0.1", "--job-id", job, "--json")
        assert out.returncode == 0, out.stderr
        procs = {p["pid"]: p for p in json.loads(out.stdout)["processes"]}
        assert (procs[ranked.pid]["rank"], procs[ranked.pid]["local_rank"], procs[ranked.pid]["world_size"]) == (
            3,
            1,
            4,
        )
        assert "rank" not in procs[plain.pid]  # unreadable as a rank: unknown (unset), as before
        table = run_cli("ps", "--port", str(k.daemon.port), "--host", "127.0.0.1", "--job-id", job)
        assert any(str(ranked.pid) in line and " 3/4 " in line for line in table.stdout.splitlines()), table.stdout

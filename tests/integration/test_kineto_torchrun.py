"""`torchrun --standalone --nproc-per-node 2 train.py` with KINETO_USE_DAEMON=1 (no dyno agent) against a real dynod:
libkineto registers all three processes, the launcher included; dynod recognises the launcher from its command line
(`dyno-cli ps` shows its role), and a plain `dyno-cli trace --iterations N` with no --process-limit completes with
exactly the two workers (never the launcher, which never steps an optimizer and would record a 500 ms fallback
window with a note), as does `--pids <launcher>`. The agent-path equivalent: test_agent_torchrun.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kineto_daemon import TRAINERS, kineto_daemon

from conftest import run_cli, wait_for

pytest.importorskip("torch")
pytestmark = [pytest.mark.integration, pytest.mark.torch]


def test_kineto_torchrun_launcher_is_recognised_and_never_traced(tmp_path: Path) -> None:
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("no torchrun console script next to this Python")
    with kineto_daemon() as k:
        job = k.new_job()
        stop_file = tmp_path / "stop"
        cmd = [
            str(torchrun), "--standalone", "--nproc-per-node", "2",
            str(TRAINERS / "agent_trainer.py"), "--dist", "--seconds", "120", "--stop-file", str(stop_file),
            "--step-sleep", "0.01",
        ]  # fmt: skip
        env = k.trainer_env(job, {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"})
        with open(tmp_path / "job.log", "wb") as log:  # a file, not a pipe: output must never stall the workers
            launcher = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        k.procs.append(launcher)  # killed with its process group when the daemon closes

        registered = {p.pid: p for p in k.registered(job, 3)}
        workers = sorted(pid for pid in registered if pid != launcher.pid)
        assert launcher.pid in registered and len(workers) == 2, registered  # libkineto registers the launcher too
        assert all(launcher.pid in registered[w].ancestry for w in workers)

        out = run_cli("ps", "--port", str(k.daemon.port), "--host", "127.0.0.1", "--job-id", job, "--json")
        assert out.returncode == 0, out.stderr
        roles = {r["pid"]: r["role"] for r in json.loads(out.stdout)["processes"]}
        assert roles == {launcher.pid: "PROCESS_ROLE_LAUNCHER", **{w: "PROCESS_ROLE_TRAINER" for w in workers}}

        # Trace once both workers train: libkineto registers at import, long before gloo and DDP are set up (slow
        # on a loaded machine), and a worker that steps no optimizer gets libkineto's time window instead.
        wait_for(lambda: (tmp_path / "job.log").read_text().count("step 50") >= 2, 90, 0.2)
        res = k.trace(tmp_path / "traces", "--job-id", job, "--iterations", "2", "--timeout-s", "60")
        assert res.returncode == 0, res.stdout + res.stderr
        procs = json.loads(res.stdout)["processes"]
        assert sorted(p["pid"] for p in procs) == workers
        assert all(p["state"] == "done" and not p.get("error") for p in procs), procs
        for p in procs:  # the workers' own steps, not libkineto's fallback window
            with open(p["path"]) as f:
                events = json.load(f)["traceEvents"]
            assert sum(e.get("name", "").startswith("Optimizer.step") for e in events) >= 2

        # --pids with the launcher's pid selects its workers (ancestry), never the launcher itself
        res = k.trace(tmp_path / "traces", "--job-id", job, "--pids", str(launcher.pid), "--iterations", "1")
        assert res.returncode == 0, res.stdout + res.stderr
        assert sorted(p["pid"] for p in json.loads(res.stdout)["processes"]) == workers

        stop_file.touch()
        launcher.wait(60)
        # Both workers trained to the end and stopped at the same step. Not the exit status, which is torch's: a gloo
        # worker thread that releases a finished work's tensors while the interpreter shuts down aborts the process
        # ("terminate called without an active exception"; seen in ~1 of 8 runs before agent_trainer dropped its DDP
        # model before destroy_process_group, 0 of 24 after), after the script has finished.
        log_text = (tmp_path / "job.log").read_text()
        finished = re.findall(r"finished (\d+)", log_text)
        assert len(finished) == 2 and finished[0] == finished[1], log_text[-3000:]

"""`dyno-run -- torchrun --nproc-per-node 2 train.py` end to end with a real dynod: the two workers register, the
torchrun launcher does not (an --iterations trace would wait for its optimizer steps), and a plain `dyno-cli trace
--iterations N` with no --process-limit completes with both workers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import grpc
import pytest

from dyno.v1 import dyno_pb2, dyno_pb2_grpc

from conftest import run_cli, wait_for

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

TRAINER = Path(__file__).resolve().parent / "trainers" / "agent_trainer.py"


def test_torchrun_launcher_is_not_traced_and_an_iteration_trace_completes(dynod_factory, tmp_path: Path) -> None:
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("no torchrun console script next to this Python")
    d = dynod_factory()
    job = f"torchrun-{uuid.uuid4().hex[:8]}"
    stop_file = tmp_path / "stop"
    cmd = [
        sys.executable, "-m", "dyno.client.run", "--job-id", job, "--socket", str(d.agent_socket), "--",
        str(torchrun), "--standalone", "--nproc-per-node", "2",
        str(TRAINER), "--dist", "--seconds", "300", "--stop-file", str(stop_file), "--step-sleep", "0.01",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    log = tmp_path / "job.log"  # a file, not a pipe: the workers' output must never stall them
    with open(log, "wb") as out:
        job_proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    stub = dyno_pb2_grpc.DynoStub(grpc.insecure_channel(d.target))

    def registered() -> list:
        return list(stub.ListProcesses(dyno_pb2.ListProcessesRequest(job_id=job), timeout=5).processes)

    try:
        workers = wait_for(lambda: len(r := registered()) >= 2 and r, 90, 0.2)
        # dyno-run execs: the launcher is the process we started; its workers are its children
        assert sorted(p.rank for p in workers) == [0, 1]
        assert all(job_proc.pid in p.ancestry for p in workers)
        assert job_proc.pid not in {p.pid for p in registered()}, "the torchrun launcher registered"

        res = run_cli(
            "trace", "--host", "127.0.0.1", "--port", str(d.port), "--job-id", job, "--iterations", "2",
            "--output-dir", str(tmp_path / "traces"), "--json", "--timeout-s", "60", "--no-analyze",
            timeout=90,
        )  # fmt: skip
        assert res.returncode == 0, res.stdout + res.stderr
        result = json.loads(res.stdout)
        procs = result["processes"]
        assert sorted(p["pid"] for p in procs) == sorted(p.pid for p in workers)
        assert all(p["state"] == "done" for p in procs), procs
        # --pids with the launcher's pid selects its workers (ancestry), and nothing waits for the launcher itself
        res = run_cli(
            "trace", "--host", "127.0.0.1", "--port", str(d.port), "--job-id", job, "--pids", str(job_proc.pid),
            "--iterations", "1", "--output-dir", str(tmp_path / "traces"), "--json", "--timeout-s", "60",
            "--no-analyze", timeout=90,
        )  # fmt: skip
        assert res.returncode == 0, res.stdout + res.stderr
        assert sorted(p["pid"] for p in json.loads(res.stdout)["processes"]) == sorted(p.pid for p in workers)
        stop_file.touch()
        assert job_proc.wait(60) == 0, log.read_text()[-3000:]
    finally:
        if job_proc.poll() is None:
            os.killpg(job_proc.pid, signal.SIGKILL)
            job_proc.wait(10)

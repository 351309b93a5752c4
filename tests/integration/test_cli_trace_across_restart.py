"""`dyno-cli trace` running while the host's dynod restarts mid-trace: the two agent trainers of the job go on
recording, and report their files to the restarted dynod once registered again, one by one (it takes each on from
its report). dyno-cli used to give up on the restarted daemon's "no trace ... holds no record" answer, and would have
called the trace finished as soon as the first process had reported; it now waits (until --timeout-s) and fetches
both files. Real dynod, real agent-instrumented CPU torch trainers, real dyno-cli."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from restart_fetch import manifest_processes

from dyno.client.client import DynoClient
from dyno.daemon.trace_agents import ADOPTED_NOTE
from dyno.v1 import dyno_pb2

from conftest import wait_for

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

TRAINER = Path(__file__).resolve().parent / "trainers" / "agent_trainer.py"


def _running(c: DynoClient, trace_id: str) -> int:
    try:
        return sum(p.state == dyno_pb2.TRACE_STATE_RUNNING for p in c.get_trace(trace_id).processes)
    except Exception:  # NOT_FOUND until dyno-cli's StartTrace has reached the daemon
        return 0


def test_trace_waits_through_a_daemon_restart_and_fetches_every_process(dynod_factory, tmp_path: Path) -> None:
    d = dynod_factory()
    job = f"across-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "DYNO_AGENT_SOCKET": str(d.agent_socket), "DYNO_JOB_ID": job}
    cmd = [sys.executable, str(TRAINER), "--explicit", "--seconds", "150", "--step-sleep", "0.005"]
    logs = [tmp_path / f"trainer{i}.log" for i in range(2)]
    trainers = []
    for log in logs:
        with open(log, "wb") as out:
            trainers.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env))
    cli = None
    try:
        with DynoClient(d.target, timeout_s=5) as c:
            wait_for(lambda: len(c.list_processes(job).processes) == 2, 90, 0.1)
        trace_id = f"across-{uuid.uuid4().hex[:8]}"
        out_dir = tmp_path / "out"
        cli = subprocess.Popen(
            [
                sys.executable, "-m", "dyno.client", "trace", "--hosts", d.target, "--job-id", job,
                "--trace-id", trace_id, "--duration-ms", "6000", "--output-dir", str(out_dir), "--no-analyze",
                "--timeout-s", "90", "--call-timeout-s", "30", "--json",
            ],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        with DynoClient(d.target, timeout_s=5) as c:
            wait_for(lambda: _running(c, trace_id) == 2, 60, 0.05)
            before = c.status().instance_id
        d.restart()  # both are recording; the window has seconds to go
        with DynoClient(d.target, timeout_s=5) as c:
            after = c.status().instance_id
        assert before and after and before != after  # what dyno-cli tells the restart by
        stdout, stderr = cli.communicate(timeout=150)
        assert cli.returncode == 0, stdout + stderr
        procs = manifest_processes(out_dir, trace_id)
        assert sorted(p["pid"] for p in procs) == sorted(t.pid for t in trainers), procs
        for p in procs:
            assert p["state"] == "done" and p["fetch"] == "fetched", p
            assert ADOPTED_NOTE in p["error"], p  # each was taken on by the restarted daemon
            assert (out_dir / trace_id / p["file"]).stat().st_size > 0
    finally:
        if cli is not None and cli.poll() is None:
            cli.kill()
        for t in trainers:
            t.kill()
            t.wait(10)
    for log in logs:
        assert "Traceback" not in log.read_text(errors="replace")

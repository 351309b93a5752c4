"""Two real dynods on loopback (one without auth, one with --auth-token-file), each with a real agent-instrumented
CPU torch trainer behind it as rank 0 / 1 of one job: the cluster tests' shared set-up."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc

from dyno.v1 import dyno_pb2, dyno_pb2_grpc

from conftest import Dynod, free_port, short_tmpdir, wait_for

TRAINER = Path(__file__).resolve().parent / "trainers" / "agent_trainer.py"


@dataclass
class Job:
    open: Dynod  # no auth
    locked: Dynod  # --auth-token-file
    token: Path
    job_id: str
    logs: list[Path]

    @property
    def daemons(self) -> tuple[Dynod, Dynod]:
        return self.open, self.locked

    @property
    def hosts(self) -> str:
        return f"{self.open.target},{self.locked.target}"

    def host_dir(self, d: Dynod) -> str:
        return f"127.0.0.1_{d.port}"


def registered(d: Dynod, job_id: str) -> list[dyno_pb2.ProcessInfo]:
    with grpc.insecure_channel(d.target) as ch:
        req = dyno_pb2.ListProcessesRequest(job_id=job_id)
        return list(dyno_pb2_grpc.DynoStub(ch).ListProcesses(req, timeout=5).processes)


@contextmanager
def two_host_job(prefix: str, *, ddp: bool, dynod_args: tuple[str, ...] = ()) -> Iterator[Job]:
    """The job, once both trainers are registered and stepping; ``ddp``: the ranks form a gloo DDP group;
    ``dynod_args``: more flags for both daemons."""
    work = short_tmpdir(f"dyno-{prefix}-")
    token = work / "token"
    token.write_text(f"{prefix}-test-token-0123456789abcdef\n")
    token.chmod(0o600)
    daemons = [Dynod([*dynod_args]), Dynod(["--auth-token-file", str(token), *dynod_args])]
    trainers: list[subprocess.Popen[bytes]] = []
    logs = [work / f"rank{r}.log" for r in range(2)]
    job_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
    try:
        for d in daemons:
            d.start()
        master = str(free_port())
        for rank, (d, log) in enumerate(zip(daemons, logs, strict=True)):
            env = {
                **os.environ,
                "PYTHONUNBUFFERED": "1",
                "DYNO_AGENT_SOCKET": str(d.agent_socket),
                "DYNO_JOB_ID": job_id,
                "RANK": str(rank),
                "LOCAL_RANK": "0",
                "WORLD_SIZE": "2",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": master,
            }
            cmd = [sys.executable, str(TRAINER), "--explicit", "--seconds", "300", "--step-sleep", "0.01"]
            cmd += ["--dist"] if ddp else []
            with open(log, "wb") as out:
                trainers.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env))
        for d in daemons:
            wait_for(lambda d=d: registered(d, job_id), 90, 0.2)
        wait_for(lambda: all("step " in log.read_text() for log in logs), 90, 0.2)
        yield Job(daemons[0], daemons[1], token, job_id, logs)
    finally:
        for t in trainers:
            t.kill()
            t.wait(10)
        for d in daemons:
            d.close()
        for f in work.iterdir():
            f.unlink()
        work.rmdir()

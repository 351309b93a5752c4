"""A real dynod serving libkineto in filesystem-socket mode in its own directory, and KINETO_USE_DAEMON=1 trainers
started against it (their job id: SLURM_JOB_ID, as libkineto sends it), for the kineto trainer tests."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dyno.client.client import DynoClient
from dyno.job_ids import JOB_ID_VARIABLES
from dyno.v1 import dyno_pb2

from conftest import Dynod, run_cli, short_tmpdir, wait_for

TRAINERS = Path(__file__).resolve().parent / "trainers"


class KinetoDaemon:
    def __init__(self) -> None:
        self.dir = short_tmpdir("dyno-kd-")
        self.kineto_dir = self.dir / "k"
        (self.dir / "kineto.conf").write_text("ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS=1\n")
        self.daemon = Dynod(["--kineto-socket-dir", str(self.kineto_dir)], gpu_backend="none", metrics=False)
        self.procs: list[subprocess.Popen] = []  # killed with their process group by close()

    def new_job(self) -> str:
        return str(5_000_000 + uuid.uuid4().int % 1_000_000)

    def trainer_env(self, job: str, env_extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a KINETO_USE_DAEMON=1 trainer of job `job` (its SLURM_JOB_ID) against this daemon."""
        # The daemon reads job ids from the trainer's environment: none inherited from where the tests run.
        env = {k: v for k, v in os.environ.items() if k not in JOB_ID_VARIABLES}
        env.update(
            {
                "KINETO_USE_DAEMON": "1",
                "KINETO_IPC_SOCKET_DIR": str(self.kineto_dir),
                "KINETO_CONFIG": str(self.dir / "kineto.conf"),
                "SLURM_JOB_ID": job,
                **(env_extra or {}),
            }
        )
        return env

    def start_trainer(
        self,
        script: str | Path,
        *args: str,
        job: str,
        ready: Callable[[str], bool],
        env_extra: dict[str, str] | None = None,
    ) -> tuple:
        """Start trainers/<script> (or the absolute path `script`) and read its stdout up to the line `ready`
        accepts; -> (process, that line)."""
        proc = self.spawn_trainer(script, *args, job=job, env_extra=env_extra)
        return proc, self.wait_ready(proc, ready, script)

    def spawn_trainer(
        self, script: str | Path, *args: str, job: str, env_extra: dict[str, str] | None = None
    ) -> subprocess.Popen:
        """Start trainers/<script> without waiting for it (several start at once: torch's import is most of a
        trainer's start); then wait_ready."""
        proc = subprocess.Popen(
            [sys.executable, str(TRAINERS / script), *args],
            env=self.trainer_env(job, env_extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    @staticmethod
    def wait_ready(proc: subprocess.Popen, ready: Callable[[str], bool], script: str | Path = "trainer") -> str:
        """Read `proc`'s stdout up to the line `ready` accepts (then keep draining it); -> that line."""
        assert proc.stdout is not None
        line = next((line for line in proc.stdout if ready(line)), "")
        assert line, f"{script} exited before it was ready"
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep draining
        return line

    def registered(self, job: str, count: int) -> list[dyno_pb2.ProcessInfo]:
        with DynoClient(self.daemon.target, timeout_s=5) as c:
            return wait_for(
                lambda: (lambda ps: ps if len(ps) >= count else None)(list(c.list_processes(job).processes)), 60, 0.2
            )

    def trace(self, out: Path, *args: str) -> subprocess.CompletedProcess:
        """`dyno-cli trace ARGS --json --no-analyze` into `out`."""
        return run_cli(
            "trace",
            *("--port", str(self.daemon.port), "--host", "127.0.0.1", "--output-dir", str(out)),
            *("--json", "--no-analyze", *args),
            timeout=120,
        )

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextmanager
def kineto_daemon() -> Iterator[KinetoDaemon]:
    k = KinetoDaemon()
    try:
        k.daemon.start()
        yield k
    finally:
        k.close()

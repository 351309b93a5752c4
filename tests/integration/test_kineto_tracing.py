"""On-demand tracing of unmodified PyTorch (KINETO_USE_DAEMON=1) through a real dynod and `dyno-cli trace`.

One daemon and a few CPU trainers are shared by the whole module (torch start-up is the expensive part).
libkineto's daemon name is hard-coded ("dynolog"), so each daemon here serves the filesystem-socket mode in its
own directory (KINETO_IPC_SOCKET_DIR), which keeps parallel test runs apart.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kineto_daemon import KinetoDaemon

from dyno.client.client import DynoClient
from dyno.v1 import dyno_pb2

from conftest import run_cli, trace_unknown_job, wait_for

pytest.importorskip("torch")
pytestmark = [pytest.mark.integration, pytest.mark.torch]

TRAINER = Path(__file__).with_name("tracing_trainer.py")


class Trainers(KinetoDaemon):
    """The module's daemon and trainer processes."""

    def __init__(self) -> None:
        super().__init__()
        self.base_job = 4_000_000 + uuid.uuid4().int % 1_000_000

    def job(self, offset: int) -> str:
        return str(self.base_job + offset)

    def spawn(self, job: str, *extra: str, env_extra: dict[str, str] | None = None) -> subprocess.Popen[str]:
        # Wait for the training loop (a worker prints "ready"): a trace taken during start-up has no ops in it.
        proc, _ = self.start_trainer(
            TRAINER, *extra, job=job, ready=lambda line: line.strip() == "ready", env_extra=env_extra
        )
        return proc

    def client(self) -> DynoClient:
        return DynoClient(self.daemon.target, timeout_s=5)


@pytest.fixture(scope="module")
def env() -> Iterator[Trainers]:
    t = Trainers()
    t.daemon.start()
    try:
        t.spawn(t.job(0))  # a plain trainer
        t.spawn(t.job(1), "--launcher")  # a launcher (imports torch too) and its worker
        yield t
    finally:
        t.close()


def trace_cli(t: Trainers, out: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_cli(
        "trace",
        "--port",
        str(t.daemon.port),
        "--host",
        "127.0.0.1",
        "--output-dir",
        str(out),
        "--json",
        *args,
        timeout=timeout,
    )


def load_trace(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def test_ps_shows_kineto_processes_with_job_id(env: Trainers) -> None:
    (p,) = env.registered(env.job(0), 1)
    out = run_cli("ps", "--port", str(env.daemon.port), "--host", "127.0.0.1", "--job-id", env.job(0), "--json")
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)["processes"]
    assert row["pid"] == p.pid and row["protocol"] == "PROTOCOL_KINETO" and row["job_id"] == env.job(0)


def test_duration_trace_unmodified_pytorch(env: Trainers, tmp_path: Path) -> None:
    env.registered(env.job(0), 1)
    res = trace_cli(
        env, tmp_path, "--job-id", env.job(0), "--duration-ms", "300", "--start-delay-s", "0", "--trace-id", "kt-dur-1"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    result = json.loads(res.stdout)
    (proc,) = result["processes"]
    assert result["ok"] and proc["state"] == "done" and proc["size_bytes"] > 0
    assert Path(proc["path"]).parent == tmp_path / "kt-dur-1" / f"127.0.0.1_{env.daemon.port}"
    assert proc["path"].endswith(f"_{proc['pid']}.pt.trace.json")
    trace = load_trace(proc["path"])
    assert trace["trace_id"] == "kt-dur-1"
    assert any(e.get("cat") == "cpu_op" for e in trace["traceEvents"])


def test_iteration_trace_counts_optimizer_steps(env: Trainers, tmp_path: Path) -> None:
    env.registered(env.job(0), 1)
    res = trace_cli(env, tmp_path, "--job-id", env.job(0), "--iterations", "3", "--record-shapes")
    assert res.returncode == 0, res.stdout + res.stderr
    result = json.loads(res.stdout)
    (proc,) = result["processes"]
    trace = load_trace(proc["path"])
    assert trace["trace_id"] == result["trace_id"]
    steps = [
        e
        for e in trace["traceEvents"]
        if e.get("name", "").startswith("Optimizer.step#SGD.step") and e.get("ph") == "X"
    ]
    assert len(steps) >= 1
    assert any("Input Dims" in e.get("args", {}) for e in trace["traceEvents"] if e.get("cat") == "cpu_op")


def test_process_limit_prefers_the_worker_over_its_launcher(env: Trainers, tmp_path: Path) -> None:
    procs = env.registered(env.job(1), 2)
    by_pid = {p.pid: p for p in procs}
    (worker,) = [p for p in procs if any(a in by_pid for a in p.ancestry)]
    (launcher,) = [p for p in procs if p.pid != worker.pid]
    assert launcher.pid in worker.ancestry
    res = trace_cli(
        env,
        tmp_path,
        "--job-id",
        env.job(1),
        "--pids",
        str(launcher.pid),
        "--process-limit",
        "1",
        "--duration-ms",
        "200",
        "--start-delay-s",
        "0",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    (proc,) = json.loads(res.stdout)["processes"]
    assert proc["pid"] == worker.pid and proc["state"] == "done"
    assert load_trace(proc["path"])["traceEvents"]


def test_unknown_job_is_a_clear_failure(env: Trainers, tmp_path: Path) -> None:
    env.registered(env.job(0), 1)
    res = trace_unknown_job(tmp_path, "--port", str(env.daemon.port), "--host", "127.0.0.1")
    assert env.job(0) in res.stderr
    assert not list(tmp_path.iterdir())


def test_trainer_killed_mid_trace_fails_with_reason(env: Trainers) -> None:
    victim = env.spawn(env.job(2), "--step-sleep-s", "0.5")
    env.registered(env.job(2), 1)
    with env.client() as c:
        start = c.start_trace(dyno_pb2.TraceRequest(job_id=env.job(2), iterations=1000))
        (triggered,) = start.triggered
        assert triggered.pid == victim.pid
        wait_for(
            lambda: (
                c.get_trace(start.trace_id).processes[0].state
                in (dyno_pb2.TRACE_STATE_DELIVERED, dyno_pb2.TRACE_STATE_RUNNING)
            ),
            timeout_s=30,
        )
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
        final = wait_for(lambda: (lambda s: s if s.finished else None)(c.get_trace(start.trace_id)), timeout_s=30)
    (p,) = final.processes
    assert p.state == dyno_pb2.TRACE_STATE_FAILED
    assert p.error.startswith("process exited before the trace finished: libkineto picked the request up"), p.error


def test_slurm_array_task_is_traced_by_its_array_id(env: Trainers, tmp_path: Path) -> None:
    """libkineto sends only SLURM_JOB_ID (36200); the daemon reads the array id from the trainer's environment, so
    the id users see in squeue (and the agent registers) matches, and kineto's integer still does."""
    array = env.spawn("36200", env_extra={"SLURM_ARRAY_JOB_ID": "36199", "SLURM_ARRAY_TASK_ID": "0"})
    try:
        (p,) = env.registered("36199_0", 1)
        assert p.pid == array.pid and p.job_id == "36199_0"
        out = run_cli("ps", "--port", str(env.daemon.port), "--host", "127.0.0.1", "--json")
        assert out.returncode == 0, out.stderr
        rows = {r["pid"]: r for r in json.loads(out.stdout)["processes"]}
        assert rows[array.pid]["job_id"] == "36199_0" and rows[array.pid]["protocol"] == "PROTOCOL_KINETO"
        res = trace_cli(env, tmp_path, "--job-id", "36199_0", "--duration-ms", "200", "--start-delay-s", "0")
        assert res.returncode == 0, res.stdout + res.stderr
        result = json.loads(res.stdout)
        (proc,) = result["processes"]
        assert proc["pid"] == array.pid and proc["state"] == "done"
        assert any(e.get("cat") == "cpu_op" for e in load_trace(proc["path"])["traceEvents"])
        with env.client() as c:
            assert [q.job_id for q in c.get_trace(result["trace_id"]).processes] == ["36199_0"]
            # `--job-id 36200`, as before, names the same process
            assert [q.pid for q in c.list_processes("36200").processes] == [array.pid]
    finally:
        os.killpg(array.pid, signal.SIGKILL)
        array.wait()

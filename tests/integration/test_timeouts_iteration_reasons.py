"""`dyno-cli trace --iterations N` of processes that do not finish, end to end (a real dynod, real CPU torch trainers,
dyno-cli as a separate process): each process that did not finish says why, in the terminal output and in --json,
and the exit code is that of a partial trace when some finished.

- dyno agent processes that never stepped, or stepped and then stopped: when dyno-cli's --timeout-s cancels them,
  the agent's own reason (`no optimizer step in N s: ...`, `no optimizer step for N s ...`) is what the user reads,
  not the bare `no optimizer step had started the trace` of a cancel that came before the agent could say it.
- libkineto (KINETO_USE_DAEMON=1) processes: one that stepped, stopped, and exits fails at once with
  `exited before the trace finished`; one that stays alive without stepping says that libkineto picked the request
  up and has not started recording (dynod cannot see its steps), and what to do.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from kineto_daemon import KinetoDaemon, kineto_daemon

from dyno.client.client import DynoClient
from dyno.client.errors import DynoError
from dyno.v1 import dyno_pb2

from conftest import run_cli, wait_for

pytest.importorskip("torch")
pytestmark = [pytest.mark.integration, pytest.mark.torch]


def _agent_env(k: KinetoDaemon) -> dict[str, str]:
    # an agent process of the same job (its SLURM_JOB_ID), without libkineto's daemon mode
    return {"KINETO_USE_DAEMON": "", "DYNO_AGENT_SOCKET": str(k.daemon.agent_socket)}


def _trace(k: KinetoDaemon, out: Path, *args: str):
    return run_cli(
        "trace",
        *("--port", str(k.daemon.port), "--host", "127.0.0.1", "--output-dir", str(out)),
        *("--json", "--no-analyze", *args),
        timeout=180,
    )


def _exit_once_delivered(k: KinetoDaemon, trace_id: str, pid: int, exit_file: Path) -> None:
    """Touch `exit_file` (the trainer `pid` then exits) once its daemon says `pid` has the trace's request."""

    def delivered() -> bool:
        try:
            status = c.get_trace(trace_id)
        except DynoError:  # not started yet
            return False
        return any(p.pid == pid and p.state == dyno_pb2.TRACE_STATE_DELIVERED for p in status.processes)

    with DynoClient(k.daemon.target, timeout_s=5) as c:
        wait_for(delivered, 60, 0.1)
    exit_file.touch()


def test_agent_processes_cancelled_at_timeout_say_why(tmp_path: Path) -> None:
    with kineto_daemon() as k:
        job = k.new_job()
        never, stopped = (
            k.spawn_trainer(
                "stalling_trainer.py", "--agent", "--no-step-s", "2", "--steps", steps, job=job, env_extra=_agent_env(k)
            )
            for steps in ("0", "25")
        )  # started at once, then waited for
        for proc in (never, stopped):
            k.wait_ready(proc, lambda s: s.startswith("stopped"))
        k.registered(job, 2)
        res = _trace(k, tmp_path / "out", "--job-id", job, "--iterations", "3", "--timeout-s", "8")
        out = res.stdout + res.stderr
        assert res.returncode == 1, out  # nothing arrived
        procs = {p["pid"]: p for p in json.loads(res.stdout)["processes"]}
        assert procs[never.pid]["state"] == "cancelled", procs
        assert procs[stopped.pid]["state"] == "cancelled", procs
        never_error, stopped_error = procs[never.pid]["error"], procs[stopped.pid]["error"]
        assert never_error.startswith("cancelled by dyno-cli (--timeout-s"), never_error
        # the agent's own reason, with what to do
        assert "no optimizer step in" in never_error and "has not called optimizer.step()" in never_error
        assert "--duration-ms" in never_error
        assert "no optimizer step for" in stopped_error and "of its 25 steps" in stopped_error, stopped_error
        assert "stopped stepping its optimizer" in stopped_error
        # the terminal says it too, per process
        assert f"pid {never.pid}: {never_error}" in res.stderr, res.stderr
        assert f"pid {stopped.pid}: {stopped_error}" in res.stderr, res.stderr
        assert procs[never.pid]["waiting"] and procs[stopped.pid]["waiting"]


def test_mixed_job_some_finish_some_do_not(tmp_path: Path) -> None:
    """Agent and libkineto processes of one job: one of each steps and is traced; an agent one and a kineto one
    stopped stepping and stay alive; a kineto one stopped stepping and exits mid-trace."""
    with kineto_daemon() as k:
        job = k.new_job()
        exit_file = k.dir / "exit-now"
        stopped = lambda s: s.startswith("stopped")  # noqa: E731
        # started at once, then waited for: torch's import is most of each one's start
        starts = [
            (k.spawn_trainer("agent_trainer.py", "--explicit", "--seconds", "150", job=job, env_extra=_agent_env(k)),
             lambda s: s.startswith("step ")),
            (k.spawn_trainer("stalling_trainer.py", "--agent", "--no-step-s", "2", "--steps", "25", job=job,
                             env_extra=_agent_env(k)), stopped),
            (k.spawn_trainer("agent_trainer.py", "--seconds", "150", job=job), lambda s: "step " in s),
            (k.spawn_trainer("stalling_trainer.py", "--steps", "25", job=job), stopped),
            (k.spawn_trainer("stalling_trainer.py", "--steps", "25", "--stop-file", str(exit_file), job=job), stopped),
        ]  # fmt: skip
        for proc, ready in starts:
            k.wait_ready(proc, ready)
        agent_ok, agent_stopped, kineto_ok, kineto_stopped, kineto_exits = (proc for proc, _ in starts)
        k.registered(job, 5)
        # the exiting one exits mid-trace: once libkineto (polling every second here) has picked the request up
        trace_id = f"mixed-{job}"
        threading.Thread(
            target=_exit_once_delivered, args=(k, trace_id, kineto_exits.pid, exit_file), daemon=True
        ).start()
        res = _trace(
            k, tmp_path / "out", "--job-id", job, "--iterations", "3", "--timeout-s", "14", "--trace-id", trace_id
        )
        out = res.stdout + res.stderr
        assert res.returncode == 3, out  # partial: some files arrived, some processes did not finish
        result = json.loads(res.stdout)
        assert result["status"] == "partial" and result["exit_code"] == 3
        procs = {p["pid"]: p for p in result["processes"]}
        assert procs[agent_ok.pid]["fetch"] == "fetched" and procs[kineto_ok.pid]["fetch"] == "fetched", procs
        exited = procs[kineto_exits.pid]
        assert exited["state"] == "failed", exited
        assert "exited before the trace finished" in exited["error"], exited
        assert "no optimizer step for" in procs[agent_stopped.pid]["error"], procs[agent_stopped.pid]
        alive = procs[kineto_stopped.pid]
        assert alive["state"] == "cancelled", alive
        assert "libkineto picked the request up" in alive["error"] and "had not started recording" in alive["error"]
        assert "--duration-ms" in alive["error"], alive
        for pid in (agent_stopped.pid, kineto_stopped.pid, kineto_exits.pid):
            assert f"pid {pid}: {procs[pid]['error']}" in res.stderr, res.stderr

"""dynod restarted while an agent trace waits (for optimizer steps that do not come, or for a distant start time):
the restarted daemon never knew the trace, so the agent cancels it when its stream ends, and the process is
traceable again as soon as it re-registers (not `busy` until the old trace's deadline)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dyno.client.client import DynoClient
from dyno.v1 import dyno_pb2

from conftest import wait_for

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

TRAINERS = Path(__file__).resolve().parent / "trainers"
FINAL = {dyno_pb2.TRACE_STATE_DONE, dyno_pb2.TRACE_STATE_FAILED, dyno_pb2.TRACE_STATE_TIMED_OUT}


def _registered_ms(c: DynoClient, job: str, pid: int) -> int:
    return next((p.registered_ms for p in c.list_processes(job).processes if p.pid == pid), 0)


def test_a_waiting_trace_does_not_keep_the_process_busy_after_a_daemon_restart(dynod_factory) -> None:
    d = dynod_factory()
    job = f"restart-{os.getpid()}"
    # an inference loop: an --iterations trace waits for optimizer steps that never come
    script = f"import torch.optim, runpy; runpy.run_path({str(TRAINERS / 'no_optimizer_trainer.py')!r})"
    env = {**os.environ, "DYNO_AGENT_SOCKET": str(d.agent_socket), "DYNO_JOB_ID": job, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from dyno.client import agent; agent.start(); " + script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"  # torch loaded, the loop runs
        with DynoClient(d.target, timeout_s=5) as c:
            first = wait_for(lambda: _registered_ms(c, job, proc.pid), 60, 0.1)
            waiting = c.start_trace(dyno_pb2.TraceRequest(job_id=job, iterations=3, start_iteration_roundup=1))
            assert [p.pid for p in waiting.triggered] == [proc.pid]
            delivered = dyno_pb2.TRACE_STATE_DELIVERED  # the agent has it: waiting for optimizer steps
            assert wait_for(lambda: c.get_trace(waiting.trace_id).processes[0].state == delivered, 30, 0.05)
        d.restart()
        with DynoClient(d.target, timeout_s=5) as c:
            wait_for(lambda: _registered_ms(c, job, proc.pid) > first, 30, 0.1)
            trace_id = c.start_trace(dyno_pb2.TraceRequest(job_id=job, duration_ms=300)).trace_id
            wait_for(lambda: c.get_trace(trace_id).processes[0].state in FINAL, 30, 0.1)
            after = c.get_trace(trace_id).processes[0]
        assert after.state == dyno_pb2.TRACE_STATE_DONE, after.error  # was: FAILED, "busy: trace ... still running"
        assert proc.poll() is None
    finally:
        proc.kill()
        err = proc.communicate(timeout=10)[1]
    assert "Traceback" not in err, err

"""`dyno-cli trace --iterations N` of a real torch program that never steps an optimizer (an inference loop with
torch.optim imported): the agent gives up after its no-step bound and the trace fails with a reason that says what to
do, instead of dyno-cli waiting out its whole --timeout-s. The bounds are lowered in the trainer to 1 s without a step
and no start-up allowance (the defaults: 30 s and 300 s, dyno.client.agent.steps.NO_STEP_S and STARTUP_S)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from dyno.client.client import DynoClient

from conftest import run_cli, wait_for

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

TRAINERS = Path(__file__).resolve().parent / "trainers"


def test_iteration_trace_of_a_program_that_never_steps_fails_early_with_advice(dynod_factory, tmp_path: Path) -> None:
    d = dynod_factory()
    job = f"nostep-{uuid.uuid4().hex[:8]}"
    script = (
        "import dyno.client.agent.steps as s; s.NO_STEP_S = 1.0; s.STARTUP_S = 0.0; "
        "from dyno.client import agent; agent.start(); "
        f"import torch.optim, runpy; runpy.run_path({str(TRAINERS / 'no_optimizer_trainer.py')!r})"
    )
    env = {**os.environ, "DYNO_AGENT_SOCKET": str(d.agent_socket), "DYNO_JOB_ID": job, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        with DynoClient(d.target, timeout_s=5) as c:
            wait_for(lambda: c.list_processes(job).processes, 60, 0.1)
        res = run_cli(
            "trace", "--hosts", d.target, "--job-id", job, "--iterations", "3", "--output-dir", str(tmp_path / "out"),
            "--no-analyze", "--timeout-s", "300", timeout=120,
        )  # fmt: skip
        out = res.stdout + res.stderr
        assert res.returncode != 0, out
        # the agent's reason, not dyno-cli's "still waiting at --timeout-s" (which would take 300 s)
        assert "no optimizer step in" in out and "has not called optimizer.step()" in out, out
        assert "--duration-ms" in out, out
        assert proc.poll() is None  # the trainer goes on
    finally:
        proc.kill()
        err = proc.communicate(timeout=10)[1]
    assert "Traceback" not in err, err

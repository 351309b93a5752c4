"""The program starts its own torch profiler during an agent trace and keeps it running past the trace's end. torch
has one profiler session per process, which the program's took over: stopping "ours" ended the program's session
(an iteration trace, on the training thread: the program's own export_chrome_trace then crashed the trainer with
SIGSEGV) or gave an empty result whose export crashed it (a duration trace). Now the trace fails with the reason and
the program's profiler works as if no trace had run. Real trainer process, real dynod."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from dyno.client.client import DynoClient
from dyno.v1 import dyno_pb2

from conftest import wait_for

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

# Trains until DIR/quit exists; starts its own profiler once DIR/user_start exists, stops and exports it once
# DIR/user_stop exists.
TRAINER = textwrap.dedent(
    """
    import os, sys, time
    import torch
    from dyno.client import agent

    agent.start()
    d = sys.argv[1]
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16, 8)
    user, state = None, "before"
    print("ready", flush=True)
    while not os.path.exists(os.path.join(d, "quit")):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if state == "before" and os.path.exists(os.path.join(d, "user_start")):
            user, state = torch.profiler.profile(), "running"
            user.start()
            print("user started", flush=True)
        if state == "running" and os.path.exists(os.path.join(d, "user_stop")):
            user.stop()
            user.export_chrome_trace(os.path.join(d, "user.json"))
            print("user exported", len(user.events()), flush=True)
            state = "done"
        time.sleep(0.005)
    print("finished", flush=True)
    """
)
FINAL = {dyno_pb2.TRACE_STATE_DONE, dyno_pb2.TRACE_STATE_FAILED, dyno_pb2.TRACE_STATE_TIMED_OUT}


@pytest.mark.parametrize("window", ["duration", "iterations"])
def test_program_profiler_started_during_a_trace_survives_it(dynod_factory, tmp_path: Path, window: str) -> None:
    d = dynod_factory()
    job = f"userprof-{window}-{os.getpid()}"
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "DYNO_AGENT_SOCKET": str(d.agent_socket), "DYNO_JOB_ID": job}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    out: list[str] = []
    err: list[str] = []
    for stream, sink in ((proc.stdout, out), (proc.stderr, err)):
        threading.Thread(target=lambda s=stream, k=sink: k.extend(iter(s.readline, "")), daemon=True).start()
    try:
        with DynoClient(d.target, timeout_s=5) as c:
            wait_for(lambda: list(c.list_processes(job).processes), 30, 0.1)
            wait_for(lambda: "ready\n" in out, 30)
            request = dyno_pb2.TraceRequest(job_id=job)
            if window == "duration":
                request.duration_ms = 2500
            else:  # long enough to end only after the program's profiler started
                request.iterations, request.start_iteration_roundup = 60, 1
            trace_id = c.start_trace(request).trace_id

            def state() -> int:
                return c.get_trace(trace_id).processes[0].state

            wait_for(lambda: state() in FINAL | {dyno_pb2.TRACE_STATE_RUNNING}, 20)
            (tmp_path / "user_start").touch()
            wait_for(lambda: "user started\n" in out, 20)
            wait_for(lambda: state() in FINAL, 30, 0.1)
            ours = c.get_trace(trace_id).processes[0]
        (tmp_path / "user_stop").touch()
        wait_for(lambda: any(line.startswith("user exported") for line in out) or proc.poll() is not None, 30)
        (tmp_path / "quit").touch()
        rc = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    time.sleep(0.2)  # the pumps read the last lines
    assert rc == 0, (rc, "".join(err)[-2000:])
    assert ours.state == dyno_pb2.TRACE_STATE_FAILED, ours
    assert "started its own torch profiler during the trace" in ours.error
    exported = next(line for line in out if line.startswith("user exported"))
    assert int(exported.split()[2]) > 0  # the program's profiler recorded its ops
    assert json.loads((tmp_path / "user.json").read_text())["traceEvents"]
    assert not any("no active profiling session" in line for line in err), "".join(err)

"""A trainer that exits normally while a long trace (duration or iterations) runs: the agent writes what was
recorded and reports it done with a note (a real dynod, a real CPU torch trainer, taken and fetched by dyno-cli)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import grpc
import pytest

from dyno.v1 import dyno_pb2, dyno_pb2_grpc

from conftest import run_cli, wait_for

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

TRAINER = Path(__file__).resolve().parent / "trainers" / "agent_trainer.py"


@pytest.mark.parametrize(
    "window, requested",
    [
        (["--duration-ms", "20000"], "of the requested 20 s"),
        # stopped by the atexit handler on the main thread, the one that stepped the optimizer
        (["--iterations", "100000"], "optimizer step(s) of the requested 100000"),
    ],
    ids=["duration", "iterations"],
)
def test_trainer_exiting_mid_trace_keeps_what_was_recorded(
    dynod_factory, tmp_path: Path, window: list[str], requested: str
) -> None:
    d = dynod_factory()
    job = f"agent-exit-{uuid.uuid4().hex[:8]}"
    stop_file, out_file, err_file = tmp_path / "stop", tmp_path / "trainer.out", tmp_path / "trainer.err"
    with open(out_file, "w") as out, open(err_file, "w") as err:
        trainer = subprocess.Popen(
            [sys.executable, str(TRAINER), "--explicit", "--seconds", "120", "--stop-file", str(stop_file)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "DYNO_AGENT_SOCKET": str(d.agent_socket), "DYNO_JOB_ID": job},
        )
    try:
        stub = dyno_pb2_grpc.DynoStub(grpc.insecure_channel(d.target))

        def registered() -> dyno_pb2.ProcessInfo | None:
            procs = stub.ListProcesses(dyno_pb2.ListProcessesRequest(job_id=job), timeout=5).processes
            return next((p for p in procs if p.pid == trainer.pid), None)

        wait_for(registered, 60, 0.2)
        wait_for(lambda: "step " in out_file.read_text(), 60, 0.1)

        cli: list[subprocess.CompletedProcess] = []
        args = ["trace", "--host", "127.0.0.1", "--port", str(d.port), "--job-id", job, *window]
        args += ["--output-dir", str(tmp_path / "traces"), "--json", "--no-analyze", "--timeout-s", "60"]
        cli_thread = threading.Thread(target=lambda: cli.append(run_cli(*args, timeout=120)), daemon=True)
        cli_thread.start()

        trace_id = wait_for(lambda: (p := registered()) is not None and p.current_trace_id, 30, 0.1)
        running = dyno_pb2.TRACE_STATE_RUNNING
        wait_for(
            lambda: stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id=trace_id), timeout=5).processes[0].state == running,
            30,
            0.1,
        )
        threading.Event().wait(1.0)  # ~1 s of recorded work (hundreds of steps), then the loop ends by itself
        stop_file.touch()
        assert trainer.wait(60) == 0, err_file.read_text()  # its exit status is unchanged
        assert "finished " in out_file.read_text()

        cli_thread.join(120)
        (res,) = cli
        assert res.returncode == 0, res.stdout + res.stderr
        result = json.loads(res.stdout)
        (proc,) = result["processes"]
        assert proc["pid"] == trainer.pid and proc["state"] == "done" and proc["fetch"] == "fetched"
        assert proc["error"].startswith("ended early: the program exited after "), proc["error"]
        assert requested in proc["error"]
        assert result["errors"] == [] and result["status"] == "complete"
        assert f"pid {trainer.pid}: note: ended early: the program exited" in res.stderr

        status = stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id=trace_id), timeout=5)
        (daemon_proc,) = status.processes
        assert daemon_proc.state == dyno_pb2.TRACE_STATE_DONE and daemon_proc.error == proc["error"]

        doc = json.loads(gzip.decompress(Path(proc["path"]).read_bytes()))
        assert doc["trace_id"] == trace_id
        ops = {e.get("name") for e in doc["traceEvents"] if e.get("cat") == "cpu_op"}
        assert {"aten::addmm", "aten::mm"} & ops, "the training thread's ops are missing"
        assert not list(Path(daemon_proc.path).parent.glob("*.tmp"))
    finally:
        if trainer.poll() is None:
            trainer.kill()
        trainer.wait(10)

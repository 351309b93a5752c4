"""A finished trace stays fetchable across a dynod restart (same --trace-dir): a real dynod, a real agent-instrumented
CPU torch trainer, `dyno-cli fetch --trace-id` after the restart. A trace still running at the restart is not
recovered (no record): NOT_FOUND naming its folder."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import grpc
import pytest
from restart_fetch import fetch_processes

from dyno.daemon.tracing.journal import RECORD_NAME
from dyno.filechunks import checksum_of, new_digest
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

from conftest import run_cli, wait_for

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

TRAINER = Path(__file__).resolve().parent / "trainers" / "agent_trainer.py"


def _get(stub: dyno_pb2_grpc.DynoStub, trace_id: str) -> dyno_pb2.TraceStatus:
    return stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id=trace_id), timeout=5)


def test_finished_trace_is_fetched_after_a_daemon_restart(dynod_factory, tmp_path: Path) -> None:
    d = dynod_factory()
    job = f"recover-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "trainer.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "DYNO_AGENT_SOCKET": str(d.agent_socket), "DYNO_JOB_ID": job}
    env.update(RANK="0", WORLD_SIZE="1")
    cmd = [sys.executable, str(TRAINER), "--explicit", "--seconds", "120", "--step-sleep", "0.005"]
    with open(log, "wb") as out:
        trainer = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env)
    try:
        wait_for(lambda: "step " in log.read_text(), 90, 0.2)
        channel = grpc.insecure_channel(d.target)
        stub = dyno_pb2_grpc.DynoStub(channel)
        wait_for(lambda: stub.ListProcesses(dyno_pb2.ListProcessesRequest(job_id=job), timeout=5).processes, 60, 0.2)
        trace_id = f"rec-{uuid.uuid4().hex[:8]}"
        stub.StartTrace(dyno_pb2.TraceRequest(job_id=job, trace_id=trace_id, duration_ms=300), timeout=5)
        before = wait_for(lambda: (s := _get(stub, trace_id)).finished and s, 60, 0.1)
        (proc,) = before.processes
        assert proc.state == dyno_pb2.TRACE_STATE_DONE, proc.error
        wait_for((d.trace_dir / trace_id / RECORD_NAME).is_file, 10, 0.05)  # written just after the state changes

        # A second trace still running when the daemon goes down: it leaves no record.
        running_id = f"run-{uuid.uuid4().hex[:8]}"
        stub.StartTrace(dyno_pb2.TraceRequest(job_id=job, trace_id=running_id, duration_ms=60_000), timeout=5)
        wait_for(lambda: _get(stub, running_id).processes[0].state == dyno_pb2.TRACE_STATE_RUNNING, 30, 0.1)
        channel.close()

        d.restart()
        stub = dyno_pb2_grpc.DynoStub(grpc.insecure_channel(d.target))
        after = _get(stub, trace_id)
        assert after.finished and after.request == before.request and after.created_ms == before.created_ms
        assert list(after.processes) == list(before.processes)  # pid, rank, state done, path, size, times

        (got,) = fetch_processes(d.target, trace_id, tmp_path / "out")
        assert got["pid"] == proc.pid
        data = (tmp_path / "out" / trace_id / got["file"]).read_bytes()
        assert data == Path(proc.path).read_bytes() and len(data) == proc.size_bytes > 0
        assert checksum_of(new_digest(data)) == got["checksum"]

        res = run_cli(
            "fetch", "--hosts", d.target, "--trace-id", running_id, "--output-dir", str(tmp_path / "out2"),
            "--no-analyze", "--timeout-s", "0", timeout=60,
        )  # fmt: skip
        assert res.returncode == 1, res.stdout + res.stderr
        assert "no record of a finished trace" in res.stderr and str(d.trace_dir / running_id) in res.stderr
        assert "Traceback" not in res.stderr
    finally:
        trainer.kill()
        trainer.wait(10)

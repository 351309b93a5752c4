"""A trainer whose trace export is still running when it must exit leaves no partial or temporary file in the trace
folder, and its trace is failed with the reason: at a normal exit past the agent's EXIT_FINISH_S (the agent removes
them), and when killed mid-export (dynod removes them once the process is gone). A real dynod, a real CPU torch
trainer with the agent, its export made slow as a big trace's is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import grpc
import pytest

from dyno.client.agent import EXIT_FINISH_S
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

from conftest import Dynod, wait_for

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

TRAINER = Path(__file__).resolve().parent / "trainers" / "slow_export_trainer.py"


class Run:
    """The daemon, the trainer and its trace (started by start_trace)."""

    def __init__(self, d: Dynod, tmp_path: Path) -> None:
        self.d, self.job = d, f"agent-leftovers-{uuid.uuid4().hex[:8]}"
        self.stop_file, self.out = tmp_path / "stop", tmp_path / "trainer.out"
        with open(self.out, "w") as out:
            self.trainer = subprocess.Popen(
                [sys.executable, str(TRAINER), "--stop-file", str(self.stop_file)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.DEVNULL,
                env={
                    **os.environ,
                    "PYTHONUNBUFFERED": "1",
                    "DYNO_AGENT_SOCKET": str(d.agent_socket),
                    "DYNO_JOB_ID": self.job,
                },
            )
        self.stub = dyno_pb2_grpc.DynoStub(grpc.insecure_channel(d.target))
        self.trace_id = ""

    def start_trace(self, duration_ms: int) -> None:
        def registered() -> bool:
            procs = self.stub.ListProcesses(dyno_pb2.ListProcessesRequest(job_id=self.job), timeout=5).processes
            return any(p.pid == self.trainer.pid for p in procs)

        wait_for(registered, 60, 0.2)
        wait_for(lambda: "step " in self.out.read_text(), 60, 0.1)
        start = self.stub.StartTrace(dyno_pb2.TraceRequest(job_id=self.job, duration_ms=duration_ms), timeout=5)
        assert [p.pid for p in start.triggered] == [self.trainer.pid]
        self.trace_id = start.trace_id

    def process(self) -> dyno_pb2.ProcessTrace:
        (p,) = self.stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id=self.trace_id), timeout=5).processes
        return p

    def files(self) -> list[str]:
        """What the trace's folder holds of this trainer (its trace record aside)."""
        folder = self.d.trace_dir / self.trace_id
        return sorted(f.name for f in folder.iterdir() if f"_{self.trainer.pid}." in f.name)

    def close(self) -> None:
        if self.trainer.poll() is None:
            self.trainer.kill()
        self.trainer.wait(10)


def test_exit_past_the_cap_mid_export_leaves_no_file(dynod_factory, tmp_path: Path) -> None:
    run = Run(dynod_factory(), tmp_path)
    try:
        run.start_trace(60_000)
        wait_for(lambda: run.process().state == dyno_pb2.TRACE_STATE_RUNNING, 30, 0.1)
        run.stop_file.touch()  # the program ends: the agent stops the trace early and exports, which stalls
        wait_for(lambda: "exported" in run.out.read_text(), 30, 0.1)
        assert run.trainer.wait(60) == 0  # the exit waited EXIT_FINISH_S, not for the export
        p = wait_for(lambda: (lambda p: p if p.state != dyno_pb2.TRACE_STATE_RUNNING else None)(run.process()), 10)
        assert p.state == dyno_pb2.TRACE_STATE_FAILED
        assert f"took longer than {EXIT_FINISH_S:g} s; no file" in p.error, p.error
        assert run.files() == []  # not the raw export, not a partial copy
    finally:
        run.close()


def test_killed_mid_export_leaves_no_file(dynod_factory, tmp_path: Path) -> None:
    run = Run(dynod_factory(), tmp_path)
    try:
        run.start_trace(500)
        wait_for(lambda: "exported" in run.out.read_text(), 60, 0.1)
        assert run.files() == [Path(run.process().path).name + ".raw.tmp"]  # the export, under way
        os.kill(run.trainer.pid, signal.SIGKILL)
        run.trainer.wait(10)
        p = wait_for(lambda: (lambda p: p if p.state == dyno_pb2.TRACE_STATE_FAILED else None)(run.process()), 30)
        assert p.error.startswith("process exited") and p.error.endswith("mid-trace"), p.error
        assert wait_for(lambda: run.files() == [], 10)  # dynod removed what the dead process left
    finally:
        run.close()

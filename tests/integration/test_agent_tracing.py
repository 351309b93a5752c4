"""The dyno agent end to end: real CPU torch trainers (tests/integration/trainers/agent_trainer.py) registered
with a real dynod over its Agent Unix socket, traced through the Dyno gRPC API."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from dyno.v1 import dyno_pb2, dyno_pb2_grpc

from conftest import Dynod, run_cli, short_tmpdir, wait_for

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

TRAINER = Path(__file__).resolve().parent / "trainers" / "agent_trainer.py"
SPAWN_TRAINER = TRAINER.with_name("spawn_trainer.py")
DONE = dyno_pb2.TRACE_STATE_DONE
FAILED = dyno_pb2.TRACE_STATE_FAILED


class Trainer:
    """One trainer process; stdout and stderr are collected by threads (a full pipe would stall it)."""

    def __init__(
        self, args: list[str], env: dict[str, str], *, dyno_run: list[str] | None = None, script: Path = TRAINER
    ) -> None:
        cmd = [sys.executable, str(script), *args]
        if dyno_run is not None:
            cmd = [sys.executable, "-m", "dyno.client.run", *dyno_run, "--", *cmd]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
        )
        self.out: list[str] = []
        self.err: list[str] = []
        for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._pump, args=(stream, sink), daemon=True).start()

    @staticmethod
    def _pump(stream, sink: list[str]) -> None:
        for line in stream:
            sink.append(line)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stepping(self) -> bool:
        return any(line.startswith("step ") for line in self.out)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def trainers():
    started: list[Trainer] = []

    def make(*args, **kw) -> Trainer:
        t = Trainer(*args, **kw)
        started.append(t)
        return t

    yield make
    for t in started:
        t.stop()


def _stub(d: Dynod) -> dyno_pb2_grpc.DynoStub:
    return dyno_pb2_grpc.DynoStub(grpc.insecure_channel(d.target))


def _registered(d: Dynod, job_id: str) -> list:
    return list(_stub(d).ListProcesses(dyno_pb2.ListProcessesRequest(job_id=job_id), timeout=5).processes)


def _wait_registered(d: Dynod, job_id: str, pid: int, timeout_s: float = 60.0):
    return wait_for(lambda: next((p for p in _registered(d, job_id) if p.pid == pid), None), timeout_s, 0.2)


def _trace(d: Dynod, timeout_s: float = 60.0, **request) -> dyno_pb2.ProcessTrace:
    stub = _stub(d)
    started = stub.StartTrace(dyno_pb2.TraceRequest(**request), timeout=5)
    assert len(started.triggered) == 1, started.message
    status = wait_for(
        lambda: (s := stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id=started.trace_id), timeout=5)).finished and s,
        timeout_s,
        0.1,
    )
    (proc,) = status.processes
    return proc


def _load(path: str) -> dict:
    raw = Path(path).read_bytes()
    assert raw[:2] == b"\x1f\x8b", "trace file is not gzip-compressed"
    return json.loads(gzip.decompress(raw))


def _job() -> str:
    return f"agent-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def explicit() -> Iterator[tuple[Dynod, str, Trainer]]:
    """One dynod and one trainer calling agent.start() itself, shared by the tests that trace it (one restarts the
    daemon: the trainer registers again either way); torch's import is most of a trainer's start."""
    d = Dynod().start()
    job = _job()
    t = Trainer(
        ["--explicit", "--seconds", "300", "--step-sleep", "0.005"],
        {"DYNO_AGENT_SOCKET": str(d.agent_socket), "DYNO_JOB_ID": job, "RANK": "0", "WORLD_SIZE": "1"},
    )
    try:
        yield d, job, t
    finally:
        t.stop()
        d.close()


def test_explicit_agent_traced_by_duration_and_by_iterations(explicit: tuple[Dynod, str, Trainer]) -> None:
    d, job, t = explicit
    info = _wait_registered(d, job, t.pid)
    assert info.protocol == dyno_pb2.PROTOCOL_AGENT and info.rank == 0 and info.world_size == 1
    wait_for(t.stepping, 60)

    proc = _trace(d, job_id=job, duration_ms=300, record_shapes=True, with_stack=True)
    assert proc.state == DONE, proc.error
    assert proc.path.startswith(str(d.trace_dir)) and Path(proc.path).stat().st_size == proc.size_bytes > 0
    doc = _load(proc.path)
    trace_id = Path(proc.path).parent.name
    assert doc["trace_id"] == trace_id
    events = doc["traceEvents"]
    names = {e.get("name") for e in events}
    assert {"aten::addmm", "aten::mm"} & names, "the training thread's ops are missing"
    assert any("Input Dims" in e.get("args", {}) for e in events if e.get("cat") == "cpu_op")
    assert any(e.get("cat") == "python_function" for e in events), "no Python stack events with with_stack"
    assert not list(Path(proc.path).parent.glob("*.tmp"))

    proc = _trace(d, job_id=job, iterations=3, start_iteration_roundup=2, record_shapes=True)
    assert proc.state == DONE, proc.error
    doc = _load(proc.path)
    assert doc["trace_id"] == Path(proc.path).parent.name
    steps = [e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("Optimizer.step#SGD.step")]
    assert len(steps) == 3, "an iteration trace must hold exactly the requested optimizer steps"
    assert any(e.get("name") == "aten::addmm" and "Input Dims" in e.get("args", {}) for e in doc["traceEvents"])

    # Cancelled mid-trace: the agent stops at once, writes nothing, and takes the next request.
    stub = _stub(d)
    long = stub.StartTrace(dyno_pb2.TraceRequest(job_id=job, duration_ms=60_000), timeout=5)
    running = dyno_pb2.TRACE_STATE_RUNNING
    wait_for(
        lambda: (
            stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id=long.trace_id), timeout=5).processes[0].state == running
        ),
        30,
        0.1,
    )
    stub.CancelTrace(dyno_pb2.CancelTraceRequest(trace_id=long.trace_id), timeout=5)
    proc = _trace(d, job_id=job, iterations=1)
    assert proc.state == DONE, proc.error
    assert not Path(long.triggered[0].path).exists()
    assert t.proc.poll() is None, "tracing must not disturb the trainer"


def test_dyno_run_starts_agent_without_code_change(dynod_factory, trainers, tmp_path: Path) -> None:
    d = dynod_factory()
    job = _job()
    t = trainers(["--seconds", "120"], {}, dyno_run=["--job-id", job, "--socket", str(d.agent_socket)])
    info = _wait_registered(d, job, t.pid)  # dyno-run execs: the trainer keeps the pid we started
    assert "agent_trainer.py" in info.cmdline
    wait_for(t.stepping, 60)
    # The whole user path: dyno-cli trace asks the daemon, the agent traces, the CLI fetches the file.
    res = run_cli(
        "trace",
        "--host",
        "127.0.0.1",
        "--port",
        str(d.port),
        "--job-id",
        job,
        "--iterations",
        "2",
        "--with-flops",
        "--with-modules",
        "--output-dir",
        str(tmp_path),
        "--json",
        "--timeout-s",
        "30",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    result = json.loads(res.stdout)
    (proc,) = result["processes"]
    assert proc["pid"] == t.pid and proc["state"] == "done"
    assert Path(proc["path"]).parent == tmp_path / result["trace_id"] / f"127.0.0.1_{d.port}"
    doc = _load(proc["path"])
    assert doc["trace_id"] == result["trace_id"]
    # --with-flops: the FLOP estimates torch's export leaves out are in the file (the model's Linear layers: addmm)
    assert any(e.get("name") == "aten::addmm" and e["args"].get("flops", 0) > 0 for e in doc["traceEvents"])
    t.proc.send_signal(signal.SIGTERM)  # signals reach the trainer itself; its exit status is dyno-run's
    assert t.proc.wait(15) == -signal.SIGTERM


def test_dyno_run_registers_torch_multiprocessing_spawn_workers(dynod_factory, trainers) -> None:
    # torch.multiprocessing.spawn workers are the trainers (the parent only waits); they were never registered
    # because every multiprocessing spawn child was taken for a helper. Their DataLoader workers still are helpers.
    d = dynod_factory()
    job = _job()
    t = trainers(
        ["--seconds", "120"], {}, dyno_run=["--job-id", job, "--socket", str(d.agent_socket)], script=SPAWN_TRAINER
    )
    started = wait_for(lambda: next((line.split() for line in t.out if line.startswith("worker ")), None), 60, 0.1)
    worker, loader = int(started[1]), int(started[3])
    info = _wait_registered(d, job, worker)
    assert t.pid in info.ancestry
    assert "spawn_trainer.py --seconds 120 [" in info.cmdline, info.cmdline  # the program, not multiprocessing's -c
    proc = _trace(d, job_id=job, iterations=2, start_iteration_roundup=1, process_limit=1)  # the leaf: the worker
    assert (proc.pid, proc.state) == (worker, DONE), proc.error
    steps = [e for e in _load(proc.path)["traceEvents"] if str(e.get("name", "")).startswith("Optimizer.step#SGD")]
    assert len(steps) == 2
    registered = {p.pid for p in _registered(d, job)}
    assert worker in registered and loader not in registered, registered


def test_agent_reregisters_after_daemon_restart(explicit: tuple[Dynod, str, Trainer]) -> None:
    d, job, t = explicit
    first = _wait_registered(d, job, t.pid)
    wait_for(t.stepping, 60)
    d.restart()
    again = _wait_registered(d, job, t.pid, timeout_s=30)
    assert again.registered_ms > first.registered_ms
    proc = _trace(d, job_id=job, iterations=2)
    assert proc.state == DONE, proc.error
    assert t.proc.poll() is None


def test_trainer_without_daemon_runs_to_completion(trainers) -> None:
    missing = short_tmpdir() / "no-daemon.sock"
    t = trainers(["--explicit", "--steps", "150", "--step-sleep", "0"], {"DYNO_AGENT_SOCKET": str(missing)})
    try:
        assert t.proc.wait(120) == 0, "".join(t.err)
    finally:
        missing.parent.rmdir()  # empty: nothing ever listened there
    wait_for(lambda: any(line.startswith("finished 150") for line in t.out), 5)
    assert "no dyno daemon" in "".join(t.err)


def test_trace_runner_reasons_and_start_time(tmp_path: Path) -> None:
    # In-process: the agent's trace runner against a process that never steps its optimizer.
    import torch  # noqa: F401

    from dyno.client.agent.trace import AgentTraceSpec, StepCounter, TraceFailed, run_trace

    steps = StepCounter()
    steps.install()
    assert steps.installed
    spec = AgentTraceSpec(
        trace_id="t1",
        output_path=tmp_path / "x.pt.trace.json.gz",
        iterations=2,
        deadline_ms=int(time.time() * 1000) + 300,
    )
    with pytest.raises(TraceFailed, match="no optimizer step"):
        run_trace(spec, steps, threading.Event(), lambda: None)
    unwritable = AgentTraceSpec(trace_id="t2", output_path=Path("/dev/null/sub/x.gz"), duration_ms=10)
    with pytest.raises(TraceFailed, match="cannot be created"):
        run_trace(unwritable, steps, threading.Event(), lambda: None)
    assert not list(tmp_path.iterdir())

    # start_time_ms is honoured: the profiler runs no earlier than asked.
    start_ms = int(time.time() * 1000) + 300
    running_at: list[int] = []
    spec = AgentTraceSpec(
        trace_id="t3", output_path=tmp_path / "y.pt.trace.json.gz", duration_ms=50, start_time_ms=start_ms
    )
    result = run_trace(spec, steps, threading.Event(), lambda: running_at.append(int(time.time() * 1000)))
    assert running_at and running_at[0] >= start_ms
    assert _load(str(result.path))["trace_id"] == "t3" and result.size_bytes == result.path.stat().st_size

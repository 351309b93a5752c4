"""`dyno-cli trace` running while the host's dynod restarts mid-trace: the two agent trainers of the job go on
recording, and report their files to the restarted dynod once registered again, one by one (it takes each on from
its report); or one of them has reported done before the restart, which the restarted dynod knows from the trace's
record. dyno-cli waits for the restarted daemon (until --timeout-s), does not call the trace finished when the first
process has reported, and fetches both files. Real dynod, real agent-instrumented CPU torch trainers, real dyno-cli."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from restart_fetch import manifest_processes

from dyno.client.client import DynoClient
from dyno.daemon.tracing.agent_side import ADOPTED_NOTE, RESUMED_NOTE
from dyno.v1 import dyno_pb2

from conftest import Dynod, wait_for

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

TRAINER = Path(__file__).resolve().parent / "trainers" / "agent_trainer.py"


def _running(c: DynoClient, trace_id: str) -> int:
    try:
        return sum(p.state == dyno_pb2.TRACE_STATE_RUNNING for p in c.get_trace(trace_id).processes)
    except Exception:  # NOT_FOUND until dyno-cli's StartTrace has reached the daemon
        return 0


class _Run:
    """Two agent trainers of one job (each ends when its stop file appears) and `dyno-cli trace` of the job, with a
    window of `duration_ms`, running."""

    def __init__(self, d: Dynod, tmp_path: Path, duration_ms: int) -> None:
        self.d, self.job, self.tmp_path = d, f"across-{uuid.uuid4().hex[:8]}", tmp_path
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "DYNO_AGENT_SOCKET": str(d.agent_socket), "DYNO_JOB_ID": self.job}
        self.logs = [tmp_path / f"trainer{i}.log" for i in range(2)]
        self.stop_files = [tmp_path / f"stop{i}" for i in range(2)]
        self.trainers: list[subprocess.Popen[bytes]] = []
        self.cli: subprocess.Popen[str] | None = None
        for log, stop in zip(self.logs, self.stop_files, strict=True):
            cmd = [sys.executable, str(TRAINER), "--explicit", "--seconds", "150", "--step-sleep", "0.005"]
            with open(log, "wb") as out:
                cmd += ["--stop-file", str(stop)]
                self.trainers.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env))
        with DynoClient(d.target, timeout_s=5) as c:
            wait_for(lambda: len(c.list_processes(self.job).processes) == 2, 90, 0.1)
        self.trace_id = f"across-{uuid.uuid4().hex[:8]}"
        self.out_dir = tmp_path / "out"
        self.cli = subprocess.Popen(
            [
                sys.executable, "-m", "dyno.client", "trace", "--hosts", d.target, "--job-id", self.job,
                "--trace-id", self.trace_id, "--duration-ms", str(duration_ms), "--output-dir", str(self.out_dir),
                "--no-analyze", "--timeout-s", "90", "--call-timeout-s", "30", "--json",
            ],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        with DynoClient(d.target, timeout_s=5) as c:
            wait_for(lambda: _running(c, self.trace_id) == 2, 60, 0.05)

    def restart(self) -> None:
        with DynoClient(self.d.target, timeout_s=5) as c:
            before = c.status().instance_id
        self.d.restart()
        with DynoClient(self.d.target, timeout_s=5) as c:
            after = c.status().instance_id
        assert before and after and before != after  # what dyno-cli tells the restart by

    def fetched(self) -> dict[int, dict[str, Any]]:
        """dyno-cli's end, which must be a success: each trainer's process in its manifest, every one fetched."""
        assert self.cli is not None
        stdout, stderr = self.cli.communicate(timeout=150)
        assert self.cli.returncode == 0, stdout + stderr
        procs = {p["pid"]: p for p in manifest_processes(self.out_dir, self.trace_id)}
        assert sorted(procs) == sorted(t.pid for t in self.trainers), procs
        for p in procs.values():
            assert p["state"] == "done" and p["fetch"] == "fetched", p
            assert (self.out_dir / self.trace_id / p["file"]).stat().st_size > 0
        return procs

    def close(self) -> None:
        if self.cli is not None and self.cli.poll() is None:
            self.cli.kill()
        for t in self.trainers:
            t.kill()
            t.wait(10)
        for log in self.logs:
            assert "Traceback" not in log.read_text(errors="replace")


def test_trace_waits_through_a_daemon_restart_and_fetches_every_process(dynod_factory, tmp_path: Path) -> None:
    run = _Run(dynod_factory(), tmp_path, 6000)
    try:
        run.restart()  # both are recording; the window has seconds to go
        for p in run.fetched().values():
            assert ADOPTED_NOTE in p["error"], p  # each was taken on by the restarted daemon
    finally:
        run.close()


def test_a_process_done_before_the_restart_is_fetched_after_it(dynod_factory, tmp_path: Path) -> None:
    """One trainer ends (its agent writes what it recorded and reports it done) before dynod restarts, before dyno-cli
    fetched it; the other is still recording. The restarted daemon knows the first is done from the trace folder's
    record: dyno-cli fetches both, exit 0."""
    run = _Run(dynod_factory(), tmp_path, 12_000)
    try:
        first = run.trainers[0].pid
        run.stop_files[0].touch()
        with DynoClient(run.d.target, timeout_s=5) as c:
            wait_for(lambda: _state(c, run.trace_id, first) == dyno_pb2.TRACE_STATE_DONE, 60, 0.05)
        run.restart()  # the other one records on
        procs = run.fetched()
        assert RESUMED_NOTE in procs[run.trainers[1].pid]["error"], procs
    finally:
        run.close()


def _state(c: DynoClient, trace_id: str, pid: int) -> int:
    return next((p.state for p in c.get_trace(trace_id).processes if p.pid == pid), 0)

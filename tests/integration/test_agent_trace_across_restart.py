"""dynod restarted while an agent trace is recording: the trace goes on, its file is written where dynod said,
and once the agent has registered with the restarted dynod it reports the trace done; that dynod takes it on (it
never knew the trace) and `dyno-cli fetch --trace-id` gets the file. A trace that had not started recording is
still cancelled (test_agent_waiting_trace_across_restart.py). Real dynod, real agent-instrumented CPU torch
trainer."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from restart_fetch import fetch_processes

from dyno.client.client import DynoClient
from dyno.daemon.tracing.agent_side import ADOPTED_NOTE
from dyno.daemon.tracing.journal import RECORD_NAME
from dyno.v1 import dyno_pb2

from conftest import wait_for

pytestmark = pytest.mark.integration
pytest.importorskip("torch")

TRAINER = Path(__file__).resolve().parent / "trainers" / "agent_trainer.py"
FINAL = {dyno_pb2.TRACE_STATE_DONE, dyno_pb2.TRACE_STATE_FAILED, dyno_pb2.TRACE_STATE_TIMED_OUT}


def _registered_ms(c: DynoClient, job: str, pid: int) -> int:
    return next((p.registered_ms for p in c.list_processes(job).processes if p.pid == pid), 0)


def _state(c: DynoClient, trace_id: str) -> dyno_pb2.ProcessTraceStatus | None:
    try:
        return c.get_trace(trace_id).processes[0]
    except Exception:  # NOT_FOUND until the agent's report reaches the restarted daemon
        return None


def test_a_recording_trace_survives_a_daemon_restart_and_is_fetched(dynod_factory, tmp_path: Path) -> None:
    d = dynod_factory()
    job = f"midtrace-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "trainer.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "DYNO_AGENT_SOCKET": str(d.agent_socket), "DYNO_JOB_ID": job}
    cmd = [sys.executable, str(TRAINER), "--explicit", "--seconds", "120", "--step-sleep", "0.005"]
    with open(log, "wb") as out:
        trainer = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env)
    try:
        with DynoClient(d.target, timeout_s=5) as c:
            first = wait_for(lambda: _registered_ms(c, job, trainer.pid), 90, 0.1)
            # Training, not only registered: the agent registers before the trainer has built its model and taken its
            # first optimizer step (seconds on a loaded machine), and the span below counts from the first op
            wait_for(lambda: "step " in log.read_text(errors="replace"), 90, 0.1)
            trace_id = f"mid-{uuid.uuid4().hex[:8]}"
            c.start_trace(dyno_pb2.TraceRequest(job_id=job, trace_id=trace_id, duration_ms=4000))
            wait_for(lambda: _state(c, trace_id).state == dyno_pb2.TRACE_STATE_RUNNING, 30, 0.05)
            running_at = time.monotonic()
        d.stop()  # the agent's stream ends: the agent goes on recording (its stream ending cancels nothing)
        down_s = time.monotonic() - running_at  # of the 4 s window, what had been recorded by then (at most)
        down_at = time.time()
        d.start()
        with DynoClient(d.target, timeout_s=5) as c:
            wait_for(lambda: _registered_ms(c, job, trainer.pid) > first, 30, 0.1)
            got = wait_for(lambda: (s := _state(c, trace_id)) is not None and s.state in FINAL and s, 60, 0.2)
            assert got.state == dyno_pb2.TRACE_STATE_DONE, got.error
            assert ADOPTED_NOTE in got.error and got.pid == trainer.pid and got.size_bytes > 0
            # traceable again at once: the trace it finished holds it no more
            again = c.start_trace(dyno_pb2.TraceRequest(job_id=job, duration_ms=200)).trace_id
            wait_for(lambda: (s := _state(c, again)) is not None and s.state in FINAL, 30, 0.1)
            assert _state(c, again).state == dyno_pb2.TRACE_STATE_DONE, _state(c, again).error
        assert (d.trace_dir / trace_id / RECORD_NAME).is_file()  # known after another restart too

        (proc,) = fetch_processes(d.target, trace_id, tmp_path / "out")
        doc = json.loads(gzip.decompress((tmp_path / "out" / trace_id / proc["file"]).read_bytes()))
        assert doc["trace_id"] == trace_id
        # what was recorded across the restart: the trainer's ops, over (about) the whole window
        ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
        assert ops, "no cpu_op events"
        last_us = max(e["ts"] + e.get("dur", 0) for e in ops)
        span_us = last_us - min(e["ts"] for e in ops)
        # recorded for at least 0.5 s after dynod was down: measured from the first op (the trainer steps from the
        # window's start) ...
        assert span_us > (down_s + 0.5) * 1e6, (span_us, down_s)
        # ... and in Unix time (torch's export: ts in µs after baseTimeNanoseconds), against when dynod was down
        last_at = (doc["baseTimeNanoseconds"] / 1e3 + last_us) / 1e6
        assert last_at > down_at + 0.5, last_at - down_at
    finally:
        trainer.kill()
        trainer.wait(10)
    assert "Traceback" not in log.read_text(errors="replace")

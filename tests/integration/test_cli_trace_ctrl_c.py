"""Ctrl-C (a real SIGINT) of a real `dyno-cli trace` process at the moments between the waits, where Python may raise
KeyboardInterrupt in the middle of anything: while the manifest is being written (the first write, right after
StartTrace reached the daemon, and the last one), and a second Ctrl-C while the trace is being cancelled. Whatever
the moment, every trace the daemon accepted is cancelled and manifest.json is whole (no temp file left beside it).

The daemon is a real gRPC server on a free loopback port whose traces run until cancelled; the CLI process sends
itself SIGINT from inside the n-th os.fsync (the manifest's), so the signal lands at exactly that moment."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve

pytestmark = pytest.mark.integration


class RunsUntilCancelled(FakeDynoServicer):
    """StartTrace triggers two processes that stay running until CancelTrace. `events` records starts and
    cancels in order; `on_cancel` (if set) runs inside CancelTrace before it answers."""

    def __init__(self) -> None:
        super().__init__("until-cancelled")
        self.events: list[str] = []
        self.cancelled = threading.Event()
        self.on_cancel: object = None

    def StartTrace(self, request, context):  # noqa: N802 - grpc method name
        self.events.append(f"started {request.trace_id}")
        return super().StartTrace(request, context)

    def GetTrace(self, request, context):  # noqa: N802
        return self.running_status(request.trace_id, self.cancelled.is_set())

    def CancelTrace(self, request, context):  # noqa: N802
        if callable(self.on_cancel):
            self.on_cancel()
        self.events.append(f"cancelled {request.trace_id}")
        self.cancelled.set()
        return self.running_status(request.trace_id, self.cancelled.is_set())


@pytest.fixture
def daemon() -> Iterator[FakeServer[RunsUntilCancelled]]:
    with serve(lambda _port: RunsUntilCancelled()) as fake:
        yield fake


# dyno-cli with Python's SIGINT handler (a background test job's children inherit SIGINT ignored), whose n-th
# os.fsync (only manifest.json is fsynced) sends the process SIGINT: Python raises it right after the call returns.
_CLI = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
n, real_fsync, calls = int(sys.argv[1]), os.fsync, []
def fsync(fd):
    calls.append(fd)
    real_fsync(fd)
    if len(calls) == n:
        os.kill(os.getpid(), signal.SIGINT)
os.fsync = fsync
from dyno.client.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _trace(target: str, tmp_path: Path, trace_id: str, sigint_at_fsync: int, *more: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _CLI, str(sigint_at_fsync), "trace", "--host", target, "--job-id", "job1",
         "--duration-ms", "60000", "--start-delay-s", "0", "--trace-id", trace_id, "--no-analyze",
         "--output-dir", str(tmp_path), *more],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=60)
    finally:
        proc.kill()


def _whole_manifest(folder: Path) -> dict:
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json"]  # no temp file, no other file
    return json.loads((folder / "manifest.json").read_text())


def test_ctrl_c_during_the_first_manifest_write_cancels_the_trace(daemon, tmp_path: Path) -> None:
    proc = _trace(daemon.target, tmp_path, "ctrlc-first-write", sigint_at_fsync=1)
    out, err = _finish(proc)
    events = daemon.servicer.events
    assert events == ["started ctrlc-first-write", "cancelled ctrlc-first-write"], f"left running; stderr:\n{err}"
    assert proc.returncode == 130 and "Traceback" not in err, err
    manifest = _whole_manifest(tmp_path / "ctrlc-first-write")
    assert manifest["status"] == "interrupted" and manifest["exit_code"] == 130
    assert {p["pid"]: p["state"] for p in manifest["processes"]} == {1000: "cancelled", 1001: "cancelled"}


def test_a_second_ctrl_c_while_cancelling_does_not_stop_the_cancel(daemon, tmp_path: Path) -> None:
    proc = _trace(daemon.target, tmp_path, "ctrlc-twice", sigint_at_fsync=1)
    daemon.servicer.on_cancel = lambda: os.kill(proc.pid, signal.SIGINT)  # Ctrl-C again, before the cancel answers
    out, err = _finish(proc)
    assert daemon.servicer.events == ["started ctrlc-twice", "cancelled ctrlc-twice"], err
    assert proc.returncode == 130 and "Traceback" not in err, err
    manifest = _whole_manifest(tmp_path / "ctrlc-twice")
    assert manifest["status"] == "interrupted"
    assert {p["state"] for p in manifest["processes"]} == {"cancelled"}


def test_ctrl_c_during_the_last_manifest_write_keeps_it_whole(daemon, tmp_path: Path) -> None:
    """--timeout-s 0.5: the CLI cancels the trace itself, then writes the final manifest; the Ctrl-C in that write
    must neither cut it nor leave the "running" one, and the command still ends as interrupted (exit 130)."""
    # a 100 ms window (the later --duration-ms wins): a --timeout-s within the window is a usage error; this daemon
    # never finishes, so the wait still ends by --timeout-s
    proc = _trace(daemon.target, tmp_path, "ctrlc-last", 2, "--duration-ms", "100", "--timeout-s", "0.5")
    out, err = _finish(proc)
    assert daemon.servicer.events == ["started ctrlc-last", "cancelled ctrlc-last"], err
    assert proc.returncode == 130 and "Traceback" not in err, err
    manifest = _whole_manifest(tmp_path / "ctrlc-last")
    assert manifest["status"] == "failed" and manifest["exit_code"] == 1  # what the trace came to, fully recorded
    assert "HOST" in out  # the summary was printed before the held Ctrl-C ended the command


class LateReply(RunsUntilCancelled):
    """StartTrace starts the trace at once but its reply comes after the client's deadline (a slow or lost reply):
    to the client the host failed with DeadlineExceeded, yet the daemon is tracing."""

    def __init__(self) -> None:
        super().__init__()
        self.start_entered = threading.Event()

    def StartTrace(self, request, context):  # noqa: N802
        response = super().StartTrace(request, context)
        self.start_entered.set()
        time.sleep(2.0)
        return response


def test_ctrl_c_cancels_a_trace_whose_start_reply_missed_the_deadline(tmp_path: Path) -> None:
    fake = serve(lambda _port: LateReply())
    proc = _trace(fake.target, tmp_path, "ctrlc-late", 0, "--call-timeout-s", "1")  # 0: no SIGINT from fsync
    try:
        assert fake.servicer.start_entered.wait(30), "StartTrace never reached the daemon"
        proc.send_signal(signal.SIGINT)
        out, err = _finish(proc)
    finally:
        fake.server.stop(0)
    assert fake.servicer.events == ["started ctrlc-late", "cancelled ctrlc-late"], f"left running; stderr:\n{err}"
    assert proc.returncode == 130 and "Traceback" not in err, err
    manifest = _whole_manifest(tmp_path / "ctrlc-late")
    (host,) = manifest["hosts"]
    assert host["error_type"] == "DeadlineExceeded" and "started all the same: cancelled" in host["error"]
    assert {p["state"] for p in manifest["processes"]} == {"cancelled"}

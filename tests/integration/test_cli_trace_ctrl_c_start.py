"""Ctrl-C (SIGINT) of a real `dyno-cli trace` process at moments the other tests do not reach: while StartTrace is
still in flight. Against an in-process fake daemon whose StartTrace blocks until the test lets it answer, so the
signal lands at exactly that moment."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dyno.daemon.fake_server import FakeDynoServicer, serve, start_fake_servers
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.integration


class SlowStartServicer(FakeDynoServicer):
    """StartTrace answers (and so starts the trace, as far as the client can know) only once `release` is set.
    `events` records the order of starts and cancels: a cancel that overtakes its start cancels nothing."""

    def __init__(self) -> None:
        super().__init__("slow-start")
        self.start_entered = threading.Event()
        self.release = threading.Event()
        self.events: list[str] = []

    def StartTrace(self, request, context):  # noqa: N802 - grpc method name
        self.start_entered.set()
        self.release.wait(10)
        self.events.append(f"started {request.trace_id}")
        return super().StartTrace(request, context)

    def CancelTrace(self, request, context):  # noqa: N802
        self.events.append(f"cancelled {request.trace_id}")
        return super().CancelTrace(request, context)


@pytest.fixture
def slow_daemon() -> Iterator[tuple[int, SlowStartServicer]]:
    fake = serve(lambda _port: SlowStartServicer())
    yield fake.port, fake.servicer
    fake.servicer.release.set()
    fake.server.stop(0)


# dyno-cli with Python's SIGINT handler installed even when the test runs as a background job (whose children
# inherit SIGINT ignored, so Python would never raise KeyboardInterrupt).
_CLI = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from dyno.client.cli import main; sys.exit(main())"
)


def _cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_ctrl_c_while_starting_cancels_the_trace_it_started(slow_daemon, tmp_path: Path) -> None:
    port, servicer = slow_daemon
    proc = _cli(
        "trace",
        "--host", f"127.0.0.1:{port}",
        "--job-id", "job1",
        "--duration-ms", "60000",
        "--start-delay-s", "0",
        "--trace-id", "ctrlc-start",
        "--no-analyze",
        "--output-dir", str(tmp_path),
    )  # fmt: skip
    try:
        assert servicer.start_entered.wait(30), "StartTrace never reached the daemon"
        proc.send_signal(signal.SIGINT)
        # The daemon carries the request out after the Ctrl-C: its reply arrives late, as over a slow network.
        threading.Timer(0.5, servicer.release.set).start()
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert servicer.events == ["started ctrlc-start", "cancelled ctrlc-start"], f"trace left running; stderr:\n{err}"
    assert proc.returncode == 130
    assert "interrupted" in err and "Traceback" not in err
    manifest = json.loads((tmp_path / "ctrlc-start" / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and [p["pid"] for p in manifest["processes"]] == [1000, 1001]


class SlowFetchServicer(FakeDynoServicer):
    """Every trace is done at once; its file streams slowly (many small chunks) until the client gives up."""

    def __init__(self) -> None:
        super().__init__("slow-fetch")
        self.fetch_entered = threading.Event()

    def GetTrace(self, request, context):  # noqa: N802
        procs = [
            dyno_pb2.ProcessTrace(pid=p.pid, rank=p.rank, state=dyno_pb2.TRACE_STATE_DONE, size_bytes=_CHUNK * 100)
            for p in self._processes()
        ]
        return dyno_pb2.TraceStatus(trace_id=request.trace_id, processes=procs, finished=True, hostname=self.hostname)

    def FetchTraceFile(self, request, context):  # noqa: N802
        self.fetch_entered.set()
        for i in range(100):
            if not context.is_active():
                return
            time.sleep(0.2)
            yield dyno_pb2.FileChunk(data=b"x" * _CHUNK, offset=i * _CHUNK, filename=f"{request.pid}.json")


_CHUNK = 4096


def _interrupt_during_fetch(tmp_path: Path, servicer: SlowFetchServicer, trace_id: str, settle_s: float) -> None:
    """Run `dyno-cli trace` against ``servicer``, Ctrl-C it ``settle_s`` after its first fetch began; check it exits
    130 without a traceback and leaves only the manifest, every fetch 'failed'."""
    fake = serve(lambda _port: servicer)
    proc = _cli(
        "trace",
        "--host", fake.target,
        "--job-id", "job1",
        "--duration-ms", "100",
        "--start-delay-s", "0",
        "--trace-id", trace_id,
        "--no-analyze",
        "--output-dir", str(tmp_path),
    )  # fmt: skip
    try:
        assert servicer.fetch_entered.wait(30), "no fetch started"
        time.sleep(settle_s)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        fake.server.stop(0)
    assert proc.returncode == 130 and "Traceback" not in err, err
    folder = tmp_path / trace_id
    assert sorted(p.name for p in folder.rglob("*") if p.is_file()) == ["manifest.json"], err
    manifest = json.loads((folder / "manifest.json").read_text())
    assert {p["fetch"] for p in manifest["processes"]} == {"failed"}


def test_ctrl_c_while_fetching_leaves_no_partial_file(tmp_path: Path) -> None:
    _interrupt_during_fetch(tmp_path, SlowFetchServicer(), "ctrlc-fetch", settle_s=0.5)  # a few chunks written
    manifest = json.loads((tmp_path / "ctrlc-fetch" / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"


def test_ctrl_c_of_any_command_says_interrupted() -> None:
    (server,) = start_fake_servers(1, delay_s=10)  # a host that takes its time to answer
    proc = _cli("status", "--host", server.target, "--timeout-s", "20")
    try:
        deadline = time.monotonic() + 30
        while server.servicer.calls == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        server.stop(0)
    assert proc.returncode == 130
    assert err.strip() == "dyno-cli: interrupted"


class StalledFetchServicer(SlowFetchServicer):
    """The file's first chunk arrives, then the daemon stalls (a wedged host): no further chunk, no end."""

    def FetchTraceFile(self, request, context):  # noqa: N802
        yield dyno_pb2.FileChunk(data=b"x" * _CHUNK, offset=0, filename=f"{request.pid}.json")
        self.fetch_entered.set()
        while context.is_active():
            time.sleep(0.05)


def test_ctrl_c_while_a_fetch_is_stalled_leaves_no_partial_file(tmp_path: Path) -> None:
    _interrupt_during_fetch(tmp_path, StalledFetchServicer(), "ctrlc-stall", settle_s=0.3)

"""A daemon whose StartTrace reply comes after --call-timeout-s (slow, or the reply lost) has started the trace all
the same. `dyno-cli trace` reported "nothing traced" (exit 1) and left that trace running unseen; now it asks the
host with GetTrace, follows it like the others and fetches its file. A daemon that never got the request (NOT_FOUND)
stays a failed host. Against real gRPC servers on free loopback ports."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from dyno.client.cli import main as cli_main
from dyno.daemon.fake_server import FAKE_TRACE_FILE, FakeDynoServicer, FakeServer, serve
from dyno.daemon.rpc_abort import abort

pytestmark = pytest.mark.unit


class LateReply(FakeDynoServicer):
    """StartTrace starts the trace at once (if `starts`) and replies 1.5 s later; GetTrace: its one process done."""

    def __init__(self, starts: bool = True) -> None:
        super().__init__("fake-late", nprocs=1)
        self.starts = starts
        self.started: set[str] = set()
        self.lock = threading.Lock()

    def StartTrace(self, request, context):  # noqa: N802 - grpc method name
        if self.starts:
            with self.lock:
                self.started.add(request.trace_id)
        time.sleep(1.5)
        return super().StartTrace(request, context)

    def GetTrace(self, request, context):  # noqa: N802
        with self.lock:
            known = request.trace_id in self.started
        if not known:
            abort(context, grpc.StatusCode.NOT_FOUND, f"no trace {request.trace_id!r}")
        return self.done_status(request.trace_id)


@pytest.fixture
def late() -> Iterator[FakeServer[LateReply]]:
    fake = serve(lambda _port: LateReply())
    yield fake
    fake.server.stop(0)


def _trace(target: str, out: Path) -> int:
    argv = ["trace", "--host", target, "--job-id", "job1", "--duration-ms", "100", "--start-delay-s", "0"]
    return cli_main(
        [*argv, "--call-timeout-s", "1", "--trace-id", "t-late", "--no-analyze", "--json", "--output-dir", str(out)]
    )


def test_a_trace_started_despite_a_late_reply_is_followed_and_fetched(
    late: FakeServer[LateReply], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _trace(late.target, tmp_path) == 0
    answer = json.loads(capsys.readouterr().out)
    (host,) = answer["hosts"]
    assert host["state"] == "done" and "confirmed by GetTrace" in host["message"]
    (proc,) = answer["processes"]
    assert proc["fetch"] == "fetched" and Path(proc["path"]).read_bytes() == FAKE_TRACE_FILE


def test_a_late_reply_that_started_nothing_stays_failed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = serve(lambda _port: LateReply(starts=False))
    try:
        assert _trace(fake.target, tmp_path) == 1
    finally:
        fake.server.stop(0)
    (host,) = json.loads(capsys.readouterr().out)["hosts"]
    assert host["state"] == "failed" and host["error_type"] == "DeadlineExceeded"

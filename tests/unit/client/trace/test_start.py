"""Starting a trace (dyno.client.trace.start): StartTrace retried safely when its reply is lost, and a host whose reply
came too late confirmed with GetTrace (StartFanout). Real gRPC servers on loopback."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from dyno.client.cli import main as cli_main
from dyno.client.client import DynoClient
from dyno.client.trace.start import start_trace_retrying
from dyno.daemon.fake_server import FAKE_TRACE_FILE, FakeDynoServicer, FakeServer, serve
from dyno.daemon.rpc_abort import abort
from dyno.error_reasons import ErrorReason
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


class LostReply(FakeDynoServicer):
    """Its first StartTrace is carried out but the reply is lost (UNAVAILABLE); a repeat of the id is refused as
    the daemon does; GetTrace: the started trace's two processes, running."""

    def __init__(self) -> None:
        super().__init__("fake-lost")
        self.started: set[str] = set()

    def StartTrace(self, request, context):  # noqa: N802 - grpc method name
        if request.trace_id in self.started:
            abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"trace_id: {request.trace_id!r} is already in use",
                ErrorReason.TRACE_ID_IN_USE,
            )
        self.started.add(request.trace_id)
        context.abort(grpc.StatusCode.UNAVAILABLE, "connection reset")

    def GetTrace(self, request, context):  # noqa: N802
        procs = [
            dyno_pb2.ProcessTrace(pid=p.pid, rank=p.rank, state=dyno_pb2.TRACE_STATE_RUNNING) for p in self._processes()
        ]
        return dyno_pb2.TraceStatus(trace_id=request.trace_id, processes=procs, hostname=self.hostname)


def test_start_is_retried_safely_when_the_reply_is_lost() -> None:
    with serve(lambda _port: LostReply()) as fake, DynoClient(fake.target, timeout_s=5) as c:
        resp = start_trace_retrying(c, dyno_pb2.TraceRequest(job_id="job1", trace_id="t-lost", duration_ms=100))
    assert fake.servicer.started == {"t-lost"}  # carried out once
    assert resp.trace_id == "t-lost" and [p.pid for p in resp.triggered] == [1000, 1001]
    assert "after a retry" in resp.message


# A host whose StartTrace reply comes after --call-timeout-s is confirmed with GetTrace and followed; one that never
# got the request stays failed. Real gRPC servers on loopback.


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
    with serve(lambda _port: LateReply()) as fake:
        yield fake


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
    with serve(lambda _port: LateReply(starts=False)) as fake:
        assert _trace(fake.target, tmp_path) == 1
    (host,) = json.loads(capsys.readouterr().out)["hosts"]
    assert host["state"] == "failed" and host["error_type"] == "DeadlineExceeded"

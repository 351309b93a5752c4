"""A daemon's FAILED_PRECONDITION (its trace dir cannot be prepared: full, not writable, writable by others) and
INTERNAL answers are named as such in dyno-cli's stderr lines, tables and `--json` (`error_type`), as the other gRPC
codes are: they read "DynoError", the base class, which says nothing. Against a real gRPC server on a free loopback
port."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from dyno.client import DynoClient
from dyno.client.cli import main as cli_main
from dyno.client.errors import FailedPrecondition, Internal
from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit

PROBLEM = "cannot prepare the trace dir on this host: /var/tmp/dyno-traces/t1: No space left on device"


class TraceDirFull(FakeDynoServicer):
    def StartTrace(self, request, context):  # noqa: N802 - grpc method name
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, PROBLEM)

    def GetTrace(self, request, context):  # noqa: N802
        context.abort(grpc.StatusCode.INTERNAL, "Exception calling application: boom")


@pytest.fixture
def server() -> Iterator[FakeServer[TraceDirFull]]:
    srv = serve(lambda port: TraceDirFull(f"fake-{port}"))
    yield srv
    srv.server.stop(0)


def test_client_raises_the_named_classes(server) -> None:
    with DynoClient(server.target, timeout_s=2, retries=0) as client:
        with pytest.raises(FailedPrecondition, match="No space left on device"):
            client.start_trace(dyno_pb2.TraceRequest(job_id="j", duration_ms=100))
        with pytest.raises(Internal, match="boom"):
            client.get_trace("t1")


def test_trace_json_names_failed_precondition(server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(
        ["trace", "--host", server.target, "--job-id", "j", "--duration-ms", "100", "--start-delay-s", "0"]
        + ["--output-dir", str(tmp_path / "out"), "--json"]
    )
    out, err = capsys.readouterr()
    assert code == 1
    doc = json.loads(out)
    assert [h["error_type"] for h in doc["hosts"]] == ["FailedPrecondition"]
    assert f"{server.target}: {PROBLEM} (FailedPrecondition)" in err

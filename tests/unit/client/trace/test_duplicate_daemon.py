"""One daemon listed twice under different names (localhost and 127.0.0.1, a node and its IP): `dyno-cli trace`
reaches it twice with one trace id; the second StartTrace is refused as "already in use", which alone reads like a
daemon problem. The failed entry now says why that happens. Against a real gRPC server on a free loopback port
that refuses a trace id it already has, as dynod does."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from dyno.client.cli import main as cli_main
from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve
from dyno.daemon.rpc_abort import abort
from dyno.error_reasons import ErrorReason

pytestmark = pytest.mark.unit


class OneIdOnce(FakeDynoServicer):
    def __init__(self) -> None:
        super().__init__("fake-dup", nprocs=1)
        self.ids: set[str] = set()
        self.lock = threading.Lock()

    def StartTrace(self, request, context):  # noqa: N802 - grpc method name
        with self.lock:
            seen = request.trace_id in self.ids
            self.ids.add(request.trace_id)
        if seen:
            abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"trace_id: {request.trace_id!r} is already in use on this host",
                ErrorReason.TRACE_ID_IN_USE,  # as dynod says it
            )
        return super().StartTrace(request, context)

    def GetTrace(self, request, context):  # noqa: N802 - its one process is done, with the fake's file
        return self.done_status(request.trace_id)


@pytest.fixture
def fake() -> Iterator[FakeServer[OneIdOnce]]:
    with serve(lambda _port: OneIdOnce()) as fake:
        yield fake


def test_a_daemon_listed_twice_is_named_as_the_likely_cause(
    fake: FakeServer[OneIdOnce], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = f"localhost:{fake.port},127.0.0.1:{fake.port}"
    argv = ["trace", "--hosts", hosts, "--job-id", "job1", "--duration-ms", "100", "--start-delay-s", "0"]
    code = cli_main([*argv, "--no-analyze", "--json", "--output-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 3 and "Traceback" not in err  # one entry traced, the other refused: partial, as before
    failed = [h for h in json.loads(out)["hosts"] if h["state"] == "failed"]
    assert len(failed) == 1 and failed[0]["error_type"] == "InvalidArgument"
    assert "is already in use" in failed[0]["error"] and "listed twice" in failed[0]["error"]
    assert "listed twice under different names" in err

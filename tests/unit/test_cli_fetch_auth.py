"""`dyno-cli fetch` without the daemons' token: GetTrace is open, FetchTraceFile is not, so every file fails with
UNAUTHENTICATED. Each failure is one readable line that names the host once and says how to fix it (it repeated
"host: ... fetch failed: host: not authenticated ..."), the exit code is 1 and the manifest records the reason.
Against a real gRPC server on a free loopback port behind dynod's own token interceptor."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dyno.client.cli import main as cli_main
from dyno.daemon.auth import build_server_interceptors
from dyno.daemon.config import DaemonConfig
from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


class OneDoneTrace(FakeDynoServicer):
    def GetTrace(self, request, context):  # noqa: N802 - grpc method name
        done = dyno_pb2.ProcessTrace(pid=1000, rank=0, state=dyno_pb2.TRACE_STATE_DONE, size_bytes=20)
        return dyno_pb2.TraceStatus(trace_id=request.trace_id, processes=[done], finished=True, hostname=self.hostname)


@pytest.fixture
def token_daemon(tmp_path: Path) -> Iterator[FakeServer[OneDoneTrace]]:
    token = tmp_path / "token"
    token.write_text("s3cret-token-0123456789abcdef\n")
    token.chmod(0o600)
    cfg = DaemonConfig(auth_token_file=token)
    fake = serve(lambda _port: OneDoneTrace("fake-auth", nprocs=1), interceptors=build_server_interceptors(cfg))
    yield fake
    fake.server.stop(0)


def test_fetch_without_token_says_once_per_file_why_and_how(
    token_daemon: FakeServer[OneDoneTrace], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = cli_main(
        ["fetch", "--host", token_daemon.target, "--trace-id", "t1", "--no-analyze", "--output-dir", str(out)]
    )
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    line = next(ln for ln in err.splitlines() if "pid 1000" in ln)
    assert line.count(token_daemon.target) == 1, line
    assert "not authenticated" in line and "--auth-token-file" in line
    (proc,) = json.loads((out / "t1" / "manifest.json").read_text())["processes"]
    assert proc["fetch"] == "failed" and proc["error"].startswith("fetch failed: not authenticated")

"""Files that cannot be fetched, each failure one readable line, the manifest recording it, exit 1, and a hint that
the daemons still have the files (`dyno-cli fetch --trace-id ...` gets them later, no new trace needed):
- `dyno-cli fetch` without the daemons' token: GetTrace is open, FetchTraceFile is not (UNAUTHENTICATED); the line
  named the host twice ("host pid N: fetch failed: host: not authenticated ...");
- a full disk: the write error named no file ("[Errno 28] No space left on device"), now the folder it was
  writing in.
Against real gRPC servers on free loopback ports (one behind dynod's own token interceptor)."""

from __future__ import annotations

import errno
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dyno.client import client as client_module
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
    assert "1 traced file(s) not fetched are still on the daemons: `dyno-cli fetch --trace-id t1" in err
    (proc,) = json.loads((out / "t1" / "manifest.json").read_text())["processes"]
    assert proc["fetch"] == "failed" and proc["error"].startswith("fetch failed: not authenticated")


@pytest.fixture
def open_daemon() -> Iterator[FakeServer[OneDoneTrace]]:
    fake = serve(lambda _port: OneDoneTrace("fake-full", nprocs=1))
    yield fake
    fake.server.stop(0)


class _FullDiskFile(io.BytesIO):
    def write(self, data: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_fetch_on_a_full_disk_says_where_and_that_the_files_are_still_there(
    open_daemon: FakeServer[OneDoneTrace],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    real_open = open

    def full_disk_open(file: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        if "w" in mode and str(file).endswith(".part"):  # the trace file being fetched; not the manifest
            real_open(file, mode).close()  # created, as on a real disk, then every write fails
            return _FullDiskFile()
        return real_open(file, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(client_module, "open", full_disk_open, raising=False)
    out = tmp_path / "out"
    argv = ["trace", "--host", open_daemon.target, "--job-id", "job1", "--duration-ms", "100", "--start-delay-s", "0"]
    code = cli_main([*argv, "--trace-id", "t-full", "--no-analyze", "--output-dir", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    host_dir = out / "t-full" / f"127.0.0.1_{open_daemon.port}"
    assert f"pid 1000: fetch failed: cannot write a file in {host_dir}: No space left on device" in err
    assert "still on the daemons: `dyno-cli fetch --trace-id t-full" in err
    assert sorted(p.name for p in host_dir.iterdir()) == []  # no partial file left

"""The final manifest.json write fails (the disk filled up during the trace): `dyno-cli trace` used to stop with one
error line, printing neither the summary of what arrived nor its --json answer, though the files were there. Now
it shows them (and --json prints valid JSON with `manifest_error`), names the file that could not be written, and
exits 1. Against a real gRPC server on a free loopback port whose one process is done."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dyno.client.cli import main as cli_main
from dyno.client.commands import _trace_flow
from dyno.client.trace.manifest import write_manifest
from dyno.daemon.fake_server import FAKE_TRACE_FILE, FakeDynoServicer, FakeServer, serve

pytestmark = pytest.mark.unit


class OneDone(FakeDynoServicer):
    def GetTrace(self, request, context):  # noqa: N802 - grpc method name
        return self.done_status(request.trace_id)


@pytest.fixture
def daemon(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer[OneDone]]:
    def final_write_fails(folder: Path, manifest: dict[str, Any]) -> Path:
        if manifest["status"] == "running":
            return write_manifest(folder, manifest)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(folder / "manifest.json"))

    monkeypatch.setattr(_trace_flow, "write_manifest", final_write_fails)
    fake = serve(lambda _port: OneDone("fake-final", nprocs=1))
    yield fake
    fake.server.stop(0)


def _trace(target: str, out: Path, *more: str) -> int:
    argv = ["trace", "--host", target, "--job-id", "job1", "--duration-ms", "100", "--start-delay-s", "0"]
    return cli_main([*argv, "--trace-id", "t-final", "--no-analyze", "--output-dir", str(out), *more])


def test_what_arrived_is_shown_and_the_exit_code_says_failed(
    daemon: FakeServer[OneDone], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _trace(daemon.target, tmp_path) == 1
    out, err = capsys.readouterr()
    host_dir = f"127.0.0.1_{daemon.port}"
    assert f"{host_dir}/fake.json" in out  # the summary table
    manifest = tmp_path / "t-final" / "manifest.json"
    assert f"dyno-cli: error: cannot write {manifest}: No space left on device" in err and "Traceback" not in err
    assert (tmp_path / "t-final" / host_dir / "fake.json").read_bytes() == FAKE_TRACE_FILE
    assert json.loads(manifest.read_text())["status"] == "running"  # the earlier one, whole


def test_json_answer_is_still_printed(daemon: FakeServer[OneDone], tmp_path: Path, capsys) -> None:
    assert _trace(daemon.target, tmp_path, "--json") == 1
    answer = json.loads(capsys.readouterr().out)
    assert answer["ok"] is False and answer["exit_code"] == 1 and answer["status"] == "complete"
    assert answer["manifest_error"].endswith("manifest.json: No space left on device")
    assert [p["fetch"] for p in answer["processes"]] == ["fetched"]


def test_json_paths_are_absolute_for_a_relative_output_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/CLUSTER.md promises absolute `output_dir` and `path`; a relative --output-dir gave relative ones."""
    fake = serve(lambda _port: OneDone("fake-abs", nprocs=1))
    monkeypatch.chdir(tmp_path)
    try:
        assert _trace(fake.target, Path("rel"), "--json") == 0
    finally:
        fake.server.stop(0)
    answer = json.loads(capsys.readouterr().out)
    assert answer["output_dir"] == str(tmp_path / "rel" / "t-final")
    (proc,) = answer["processes"]
    assert Path(proc["path"]).is_absolute() and Path(proc["path"]).read_bytes() == FAKE_TRACE_FILE

"""TraceFlow's end when manifest.json cannot be written (a full disk): the summary and the --json answer are still
printed (with `manifest_error`), the error names the file, the exit code is 1, and a started trace is cancelled.
Against real gRPC servers on free loopback ports."""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dyno.client.cli import main as cli_main
from dyno.client.commands import _trace_flow
from dyno.client.trace import manifest as trace_manifest
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


# When the final manifest.json cannot be written, the last line says so ("manifest.json not written").


def test_the_summary_does_not_claim_a_manifest_that_was_not_written(daemons, tmp_path, monkeypatch, capsys) -> None:
    host, _ = daemons.start({"t-final"})

    def full(folder: Path, manifest: dict) -> Path:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(folder / ".manifest.json.tmp"))

    monkeypatch.setattr(_trace_flow, "write_manifest", full)  # the final write only: the "running" one went through
    code = cli_main(["fetch", "--host", str(host), "--trace-id", "t-final", "--output-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1
    folder = tmp_path / "t-final"
    assert "files and manifest.json in" not in err, err
    assert f"files in {folder} (manifest.json not written: see the error below)" in err, err
    assert "No space left on device" in err


# A manifest that cannot be written (disk full): one line naming the file, and the traces started are cancelled.


def _disk_full(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_write_manifest_names_the_file_when_the_disk_is_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_manifest.os, "fsync", _disk_full)
    with pytest.raises(OSError) as e:
        trace_manifest.write_manifest(tmp_path, {"x": 1})
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(tmp_path / "manifest.json")
    assert list(tmp_path.iterdir()) == []  # the temp file is gone too


class CancelRecorder(FakeDynoServicer):
    def __init__(self) -> None:
        super().__init__("fake-full")
        self.cancelled = threading.Event()

    def CancelTrace(self, request, context):  # noqa: N802 - grpc method name
        self.cancelled.set()
        return super().CancelTrace(request, context)


@pytest.fixture
def fake() -> Iterator[tuple[str, CancelRecorder]]:
    with serve(lambda _port: CancelRecorder()) as fake:
        yield fake.target, fake.servicer


def test_trace_is_cancelled_when_its_manifest_cannot_be_written(
    fake: tuple[str, CancelRecorder],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def full(folder: Path, manifest: dict) -> Path:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(folder / "manifest.json"))

    target, servicer = fake
    # trace's own first write (run() imports it when it runs; the flow's later writes keep theirs)
    monkeypatch.setattr(trace_manifest, "write_manifest", full)
    argv = ["trace", "--host", target, "--job-id", "job1", "--duration-ms", "100", "--start-delay-s", "0"]
    code = cli_main([*argv, "--trace-id", "t-full", "--no-analyze", "--output-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert f"No space left on device: {tmp_path / 't-full' / 'manifest.json'}" in err
    assert "cancel" in err
    assert servicer.cancelled.is_set()


def test_manifest_gets_the_same_permissions_as_the_fetched_files(tmp_path: Path) -> None:
    """The fetched traces are created with the user's umask (0644 with 022); the manifest beside them was 0600
    (tempfile.mkstemp's mode), so colleagues could read the traces but not what they are."""
    old = os.umask(0o022)
    try:
        path = trace_manifest.write_manifest(tmp_path, {"x": 1})
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]

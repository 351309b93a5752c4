"""dyno-cli trace when its manifest cannot be written (disk full): one line naming the file, and the traces it
started are cancelled instead of left running unrecorded on the daemons."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dyno.client.cli import main as cli_main
from dyno.client.commands import trace as trace_command
from dyno.client.trace import manifest as trace_manifest
from dyno.daemon.fake_server import FakeDynoServicer, serve

pytestmark = pytest.mark.unit


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
    fake = serve(lambda _port: CancelRecorder())
    yield fake.target, fake.servicer
    fake.server.stop(0)


def test_trace_is_cancelled_when_its_manifest_cannot_be_written(
    fake: tuple[str, CancelRecorder],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def full(folder: Path, manifest: dict) -> Path:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(folder / "manifest.json"))

    target, servicer = fake
    monkeypatch.setattr(trace_command, "write_manifest", full)
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

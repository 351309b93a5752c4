"""`dyno-cli trace` / `fetch` that fail on a full disk (or any write failure) leave no empty OUTPUT_DIR/TRACE_ID/
behind, but never remove a folder that existed before or one that holds any file."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fetch_cmd_fakes import FakeDaemons

from dyno.client.cli import main as cli_main
from dyno.client.commands._trace_output import trace_folder
from dyno.client.trace import manifest as trace_manifest
from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve

pytestmark = pytest.mark.unit

TID = "t-full"


def _disk_full(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifest's write fails as on a full disk, after its folder was made (the real write_manifest runs)."""
    monkeypatch.setattr(trace_manifest.os, "fsync", _disk_full)


@pytest.fixture
def fake() -> Iterator[FakeServer[FakeDynoServicer]]:
    fake = serve(lambda _port: FakeDynoServicer("fake-full"))
    yield fake
    fake.server.stop(0)


def _trace(target: str, out: Path) -> int:
    argv = ["trace", "--host", target, "--job-id", "job1", "--duration-ms", "100", "--start-delay-s", "0"]
    return cli_main([*argv, "--trace-id", TID, "--no-analyze", "--output-dir", str(out)])


def _fetch(target: str, out: Path) -> int:
    return cli_main(["fetch", "--host", target, "--trace-id", TID, "--no-analyze", "--output-dir", str(out)])


def test_trace_on_a_full_disk_leaves_no_empty_trace_folder(
    fake: FakeServer[FakeDynoServicer], full_disk: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _trace(fake.target, out) == 1
    assert f"No space left on device: {out / TID / 'manifest.json'}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # its TRACE_ID/ is gone, and the OUTPUT_DIR this run made


def test_trace_keeps_an_empty_trace_folder_that_was_there_before(
    fake: FakeServer[FakeDynoServicer], full_disk: None, tmp_path: Path
) -> None:
    (tmp_path / TID).mkdir()
    assert _trace(fake.target, tmp_path) == 1
    assert (tmp_path / TID).is_dir()


def test_fetch_on_a_full_disk_leaves_no_empty_trace_folder(
    daemons: FakeDaemons, full_disk: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host, _ = daemons.start({TID})
    assert _fetch(str(host), tmp_path) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_fetch_on_a_full_disk_keeps_a_folder_holding_files(
    daemons: FakeDaemons, full_disk: None, tmp_path: Path
) -> None:
    """An earlier run's folder (here only an empty host folder and a file in another) is left exactly as it was."""
    host, _ = daemons.start({TID})
    (tmp_path / TID / "a").mkdir(parents=True)
    (tmp_path / TID / "b").mkdir()
    (tmp_path / TID / "b" / "rank0.json").write_text("{}")
    assert _fetch(str(host), tmp_path) == 1
    assert sorted(p.name for p in (tmp_path / TID).iterdir()) == ["a", "b"]
    assert (tmp_path / TID / "b" / "rank0.json").read_text() == "{}"


def test_trace_folder_removes_only_a_new_folder_of_empty_folders_on_failure(tmp_path: Path) -> None:
    new = tmp_path / "new"
    with pytest.raises(OSError), trace_folder(new):
        (new / "host_1" / "deeper").mkdir(parents=True)  # e.g. host folders made for fetches that then failed
        raise OSError(errno.ENOSPC, "full")
    assert not new.exists()

    kept = tmp_path / "kept"
    with pytest.raises(OSError), trace_folder(kept):
        (kept / "host_1").mkdir(parents=True)
        (kept / "host_1" / "trace.json").write_text("{}")
        raise OSError(errno.EIO, "i/o error")
    assert (kept / "host_1" / "trace.json").read_text() == "{}"

    ok = tmp_path / "ok"
    with trace_folder(ok):  # success: an empty folder made by the run is the run's business
        ok.mkdir()
    assert ok.is_dir()


def test_trace_folder_never_follows_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    (target / "empty").mkdir(parents=True)
    new = tmp_path / "new"
    with pytest.raises(OSError), trace_folder(new):
        new.mkdir()
        (new / "link").symlink_to(target)
        raise OSError(errno.ENOSPC, "full")
    assert (new / "link").is_symlink() and (target / "empty").is_dir()

"""`dyno-cli trace` / `fetch` output options checked before any daemon is called, and a failed or empty run leaves
no folder it made: --output-dir that is a file (or under one) is a one-line usage error; a run that traces
nothing makes no folder at all (not even a new OUTPUT_DIR); a manifest write that fails removes the new
OUTPUT_DIR too when it holds no file; --html into a missing folder or onto a folder is refused up front instead
of failing after the trace. Against a real gRPC server on a free loopback port that counts the calls."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dyno.client.cli import main as cli_main
from dyno.client.trace import manifest as trace_manifest
from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve

pytestmark = pytest.mark.unit


@pytest.fixture
def fake() -> Iterator[FakeServer[FakeDynoServicer]]:
    fake = serve(lambda _port: FakeDynoServicer("fake-out", job_id="job1"))
    yield fake
    fake.server.stop(0)


def _trace(target: str, out: Path, *more: str, job: str = "job1") -> int:
    argv = ["trace", "--host", target, "--job-id", job, "--duration-ms", "100", "--start-delay-s", "0"]
    return cli_main([*argv, "--trace-id", "t-out", "--no-analyze", "--output-dir", str(out), *more])


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_nothing_traced_makes_no_folder(fake, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "new" / "deeper"
    assert _trace(fake.target, out, job="no-such-job") == 1
    assert "nothing traced" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # not even OUTPUT_DIR or its new parent


@pytest.mark.parametrize("under", ["", "sub"])
def test_output_dir_that_is_a_file_is_a_usage_error_before_any_call(
    fake, tmp_path: Path, capsys: pytest.CaptureFixture[str], under: str
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("keep me\n")
    out = afile / under if under else afile
    with pytest.raises(SystemExit) as e:
        _trace(fake.target, out)
    assert e.value.code == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line == f"dyno-cli: error: --output-dir {out}: cannot write there: Not a directory"  # not "File exists"
    assert fake.servicer.calls == 0 and afile.read_text() == "keep me\n"


def test_failed_manifest_write_leaves_no_new_output_dir(
    fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(trace_manifest.os, "fsync", disk_full)
    assert _trace(fake.target, tmp_path / "new" / "out") == 1
    assert "No space left on device" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["trace", "fetch"])
@pytest.mark.parametrize("where", ["missing-folder", "a-folder"])
def test_html_that_cannot_be_written_is_refused_before_any_call(
    fake, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, where: str
) -> None:
    html = tmp_path / "nowhere" / "r.html" if where == "missing-folder" else tmp_path
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        if command == "trace":
            _trace(fake.target, out, "--html", str(html))
        else:
            fetch = ["fetch", "--host", fake.target, "--trace-id", "t-out", "--output-dir", str(out)]
            cli_main([*fetch, "--html", str(html)])
    assert e.value.code == 2
    assert _one_error_line(capsys.readouterr().err).startswith(f"dyno-cli: error: --html {html}: ")
    assert fake.servicer.calls == 0 and not out.exists()


@pytest.mark.parametrize("command", ["trace", "fetch"])
def test_a_file_where_the_trace_folder_goes_is_a_usage_error(
    fake, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """OUTPUT_DIR/TRACE_ID is a file: trace failed with exit 1 ("Not a directory", from listing it), fetch with exit
    1 after attaching ("File exists", from making it)."""
    (tmp_path / "t-out").write_text("not a trace folder\n")
    with pytest.raises(SystemExit) as e:
        if command == "trace":
            _trace(fake.target, tmp_path)
        else:
            cli_main(["fetch", "--host", fake.target, "--trace-id", "t-out", "--output-dir", str(tmp_path)])
    assert e.value.code == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"dyno-cli: error: {tmp_path / 't-out'} exists and is not a folder (choose another")
    assert fake.servicer.calls == 0

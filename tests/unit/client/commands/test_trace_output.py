"""`dyno-cli trace` / `fetch` output: --output-dir and --html checked before any daemon is called (a file, a dynod's
trace dir, a missing folder are usage errors); a failed or empty run leaves no folder it made and never removes one
that existed or holds a file; every path printed is absolute. Against real gRPC servers on free loopback ports."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fetch_cmd_fakes import FakeDaemons

from dyno import trace_layout
from dyno.client.cli import main
from dyno.client.cli import main as cli_main
from dyno.client.commands import _trace_output
from dyno.client.commands._trace_output import trace_folder
from dyno.client.trace import manifest as trace_manifest
from dyno.client.trace.records import host_dir_name
from dyno.daemon.fake_server import FakeDynoServicer, FakeServer, serve
from dyno.daemon.tracing import journal as trace_journal
from dyno.daemon.tracing import trust

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


# An --output-dir that is a dynod's trace dir (or one of its trace folders) is a usage error.


def _daemon_trace_dir(tmp_path: Path) -> Path:
    trace_dir = tmp_path / "dyno-traces"
    trace_dir.mkdir(mode=0o755)
    trust.make_trace_dir(trace_dir, "20261201T000000-aaaaaaaa")  # an earlier trace, as dynod leaves it
    return trace_dir


def test_the_names_are_the_daemons() -> None:
    assert _trace_output.DAEMON_TRACE_FOLDER_FILES == (trace_layout.MARKER_NAME, trace_journal.RECORD_NAME)


@pytest.mark.parametrize("command", ["trace", "fetch"])
def test_a_daemons_trace_dir_is_refused(fake_dynod, tmp_path: Path, capsys, command: str) -> None:
    trace_dir = _daemon_trace_dir(tmp_path)
    what = ["--job-id", "j", "--duration-ms", "100"] if command == "trace" else ["--trace-id", "t1"]
    with pytest.raises(SystemExit) as e:
        cli_main([command, "--host", fake_dynod.target, *what, "--output-dir", str(trace_dir)])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert f"--output-dir {trace_dir}: is a dynod's trace dir" in err, err
    assert sorted(p.name for p in trace_dir.iterdir()) == ["20261201T000000-aaaaaaaa"]  # nothing written there


def test_one_of_its_trace_folders_is_refused_too(fake_dynod, tmp_path: Path, capsys) -> None:
    folder = _daemon_trace_dir(tmp_path) / "20261201T000000-aaaaaaaa"
    with pytest.raises(SystemExit) as e:
        cli_main(["fetch", "--host", fake_dynod.target, "--trace-id", "t1", "--output-dir", str(folder)])
    assert e.value.code == 2 and "is a dynod's trace folder" in capsys.readouterr().err


def test_an_ordinary_folder_with_traces_is_fine(tmp_path: Path) -> None:
    out = tmp_path / "traces"
    (out / "20261201T000000-aaaaaaaa" / "gpu1_1778").mkdir(parents=True)
    (out / "20261201T000000-aaaaaaaa" / "manifest.json").write_text("{}")
    _trace_output.check_writable(out)  # no SystemExit


# Every path trace and fetch print is absolute, even from a relative --output-dir.


TID = "t-abs-paths"


def test_fetch_from_a_relative_output_dir_prints_absolute_paths(
    daemons: FakeDaemons, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    host, _ = daemons.start({TID})
    assert main(["fetch", "--host", str(host), "--trace-id", TID, "--output-dir", "rel", "--no-analyze"]) == 0
    err = capsys.readouterr().err
    assert f"files and manifest.json in {tmp_path / 'rel' / TID}" in err
    assert " in rel/" not in err
    assert (
        main(["fetch", "--host", str(host), "--trace-id", TID, "--output-dir", "rel2", "--json", "--no-analyze"]) == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["output_dir"] == str(tmp_path / "rel2" / TID)
    assert doc["processes"] and all(
        Path(p["path"]).is_absolute() and Path(p["path"]).is_file() for p in doc["processes"]
    )


def test_the_hint_to_fetch_what_was_left_names_an_absolute_output_dir(
    daemons: FakeDaemons, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file the daemon still has but that did not arrive (here: its host folder cannot be made, a file is in the
    way) is listed with the command that gets it; that command's --output-dir works from any directory."""
    monkeypatch.chdir(tmp_path)
    host, _ = daemons.start({TID})
    (tmp_path / "out" / TID).mkdir(parents=True)
    (tmp_path / "out" / TID / host_dir_name(host)).write_text("in the way")
    code = main(["fetch", "--host", str(host), "--trace-id", TID, "--output-dir", "out", "--no-analyze"])
    err = capsys.readouterr().err
    assert code == 1, err
    hint = next(line for line in err.splitlines() if "still on the daemons" in line)
    assert f"--output-dir {tmp_path / 'out'}`" in hint


# A run that fails on a full disk (or any write failure) leaves no empty OUTPUT_DIR/TRACE_ID/, and never removes a
# folder that existed before or holds a file.


FULL_TID = "t-full"


def _disk_full(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifest's write fails as on a full disk, after its folder was made (the real write_manifest runs)."""
    monkeypatch.setattr(trace_manifest.os, "fsync", _disk_full)


@pytest.fixture
def full_fake() -> Iterator[FakeServer[FakeDynoServicer]]:
    full_fake = serve(lambda _port: FakeDynoServicer("full_fake-full"))
    yield full_fake
    full_fake.server.stop(0)


def _trace_full(target: str, out: Path) -> int:
    argv = ["trace", "--host", target, "--job-id", "job1", "--duration-ms", "100", "--start-delay-s", "0"]
    return cli_main([*argv, "--trace-id", FULL_TID, "--no-analyze", "--output-dir", str(out)])


def _fetch(target: str, out: Path) -> int:
    return cli_main(["fetch", "--host", target, "--trace-id", FULL_TID, "--no-analyze", "--output-dir", str(out)])


def test_trace_on_a_full_disk_leaves_no_empty_trace_folder(
    full_fake: FakeServer[FakeDynoServicer], full_disk: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _trace_full(full_fake.target, out) == 1
    assert f"No space left on device: {out / FULL_TID / 'manifest.json'}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # its TRACE_ID/ is gone, and the OUTPUT_DIR this run made


def test_trace_keeps_an_empty_trace_folder_that_was_there_before(
    full_fake: FakeServer[FakeDynoServicer], full_disk: None, tmp_path: Path
) -> None:
    (tmp_path / FULL_TID).mkdir()
    assert _trace_full(full_fake.target, tmp_path) == 1
    assert (tmp_path / FULL_TID).is_dir()


def test_fetch_on_a_full_disk_leaves_no_empty_trace_folder(
    daemons: FakeDaemons, full_disk: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host, _ = daemons.start({FULL_TID})
    assert _fetch(str(host), tmp_path) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_fetch_on_a_full_disk_keeps_a_folder_holding_files(
    daemons: FakeDaemons, full_disk: None, tmp_path: Path
) -> None:
    """An earlier run's folder (here only an empty host folder and a file in another) is left exactly as it was."""
    host, _ = daemons.start({FULL_TID})
    (tmp_path / FULL_TID / "a").mkdir(parents=True)
    (tmp_path / FULL_TID / "b").mkdir()
    (tmp_path / FULL_TID / "b" / "rank0.json").write_text("{}")
    assert _fetch(str(host), tmp_path) == 1
    assert sorted(p.name for p in (tmp_path / FULL_TID).iterdir()) == ["a", "b"]
    assert (tmp_path / FULL_TID / "b" / "rank0.json").read_text() == "{}"


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

"""`--output-dir` a dynod's own trace dir (`/tmp/dyno-traces`, the natural guess on a one-host setup): the CLI wrote
its fetched copies and manifest.json inside the daemon's folder of the same trace (beside the daemon's own files,
which `analyze` then read twice), where the daemon's retention deletes them after trace_retention_s. Both `trace`
and `fetch` now refuse such a folder before any host is called. The daemon's folder is made as dynod makes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dyno import trace_layout
from dyno.client.cli import main as cli_main
from dyno.client.commands import _trace_flow
from dyno.daemon.tracing import journal as trace_journal
from dyno.daemon.tracing import trust

pytestmark = pytest.mark.unit


def _daemon_trace_dir(tmp_path: Path) -> Path:
    trace_dir = tmp_path / "dyno-traces"
    trace_dir.mkdir(mode=0o755)
    trust.make_trace_dir(trace_dir, "20261201T000000-aaaaaaaa")  # an earlier trace, as dynod leaves it
    return trace_dir


def test_the_names_are_the_daemons() -> None:
    assert _trace_flow.DAEMON_TRACE_FOLDER_FILES == (trace_layout.MARKER_NAME, trace_journal.RECORD_NAME)


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
    _trace_flow.check_writable(out)  # no SystemExit

"""Every path `dyno-cli fetch` and `trace` print is absolute, even from a relative --output-dir: the final line's
folder, the "fetch it again" hint and --json's output_dir and paths (`status` prints the daemon's paths, which
dynod's config makes absolute: tests/unit/test_dynod_help_kineto.py, tests/integration/test_cli_status_paths.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fetch_cmd_fakes import FakeDaemons

from dyno.client.cli import main
from dyno.client.trace.records import host_dir_name

pytestmark = pytest.mark.unit

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

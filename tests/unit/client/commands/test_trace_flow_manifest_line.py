"""When the final manifest.json cannot be written (a disk that filled up during the fetch), dyno-cli's last line
still said "files and manifest.json in DIR", and only the next line said it could not write it: the summary now says
the manifest was not written. In process, against fake daemons on free loopback ports."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from dyno.client.cli import main as cli_main
from dyno.client.commands import _trace_flow

pytestmark = pytest.mark.unit


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

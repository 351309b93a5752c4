"""SIGTERM (`timeout 60 dyno-cli ...`, a batch system stopping the job) ends `dyno-cli` as Ctrl-C does: manifest.json
is written with status interrupted and the exit code is 130. Before: the process died on the spot, the manifest
stayed "running" with a null exit code, and nothing was said."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from fetch_cmd_fakes import PYTHON_M_DYNO_CLIENT, FakeDaemons, sigterm_mid_fetch

from dyno.client.cli import main as cli_main

pytestmark = pytest.mark.unit


def test_sigterm_writes_the_manifest_as_interrupted(daemons: FakeDaemons, tmp_path: Path) -> None:
    code, manifest, err = sigterm_mid_fetch(daemons, tmp_path, "t-term", PYTHON_M_DYNO_CLIENT)
    assert code == 130, err
    assert manifest["status"] == "interrupted" and manifest["exit_code"] == 130
    assert "Traceback" not in err


def test_main_in_process_leaves_sigterm_as_it_was(capsys: pytest.CaptureFixture[str]) -> None:
    before = signal.getsignal(signal.SIGTERM)
    cli_main(["status", "--host", "127.0.0.1:1", "--timeout-s", "0.5"])
    assert signal.getsignal(signal.SIGTERM) == before

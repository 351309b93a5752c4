"""SIGTERM (`timeout 60 dyno-cli ...`, a batch system stopping the job) ends `dyno-cli` as Ctrl-C does: manifest.json
is written with status interrupted and the exit code is 130. Before: the process died on the spot, the manifest
stayed "running" with a null exit code, and nothing was said."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fetch_cmd_fakes import FakeDaemons

from dyno.client.cli import main as cli_main

pytestmark = pytest.mark.unit


@pytest.fixture
def daemons() -> Iterator[FakeDaemons]:
    d = FakeDaemons()
    yield d
    d.stop()


def test_sigterm_writes_the_manifest_as_interrupted(daemons: FakeDaemons, tmp_path: Path) -> None:
    host, _ = daemons.start({"t-term"}, finish_after=None)  # its processes never finish: fetch waits
    manifest = tmp_path / "t-term" / "manifest.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dyno.client", "fetch", "--host", str(host), "--trace-id", "t-term"]
        + ["--output-dir", str(tmp_path), "--no-analyze", "--timeout-s", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not manifest.exists():  # the "running" manifest: fetch is following the host
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    m = json.loads(manifest.read_text())
    assert m["status"] == "interrupted" and m["exit_code"] == 130
    assert "Traceback" not in err


def test_main_in_process_leaves_sigterm_as_it_was(capsys: pytest.CaptureFixture[str]) -> None:
    before = signal.getsignal(signal.SIGTERM)
    cli_main(["status", "--host", "127.0.0.1:1", "--timeout-s", "0.5"])
    assert signal.getsignal(signal.SIGTERM) == before

"""A `dyno-cli trace` or `fetch` killed mid-transfer (SIGKILL, a lost ssh session, the OOM killer) leaves its partial
file `.TRACE.PID.CLIPID.part` in the host's folder, as large as what had arrived. The documented recovery, `dyno-cli
fetch` of the same trace, fetched the file again but left the partial one there, hidden, for good. A fetch that
completes a file now removes that file's partials whose dyno-cli is gone (not those of one still running).
A real `dyno-cli fetch` process against fake daemons on free loopback ports."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fetch_cmd_fakes import PYTHON_M_DYNO_CLIENT

from dyno.trace_ids import safe_host

pytestmark = pytest.mark.unit

TRACE = "t-parts"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _fetch(host: object, out: Path) -> None:
    """A real `dyno-cli fetch` of TRACE from `host` into `out`; it must succeed."""
    r = subprocess.run(
        [*PYTHON_M_DYNO_CLIENT, "fetch", "--host", str(host), "--trace-id", TRACE, "--output-dir", str(out)]
        + ["--no-analyze"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr


def test_a_fetch_removes_the_partials_of_killed_runs_only(daemons, tmp_path: Path) -> None:
    host, _ = daemons.start({TRACE})
    folder = tmp_path / TRACE / f"127.0.0.1_{host.port}"
    folder.mkdir(parents=True)
    killed = folder / f".{TRACE}.1000.{_dead_pid()}.part"
    killed.write_bytes(b"x" * 4096)
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # another fetch, still at it
    try:
        alive = folder / f".{TRACE}.1000.{running.pid}.part"
        alive.write_bytes(b"y")
        other_pid = folder / f".{TRACE}.1001.{_dead_pid()}.part"  # pid 1001's: its fetch cleans it, not 1000's
        other_pid.write_bytes(b"z")
        _fetch(host, tmp_path)
        assert (folder / "node0_1000.json").is_file() and (folder / "node0_1001.json").is_file()
        assert not killed.exists() and not other_pid.exists()
        assert alive.exists()
    finally:
        running.kill()
        running.wait()


def test_a_partial_of_a_dyno_cli_on_another_host_is_left_alone(daemons, tmp_path: Path) -> None:
    """An output dir on a shared filesystem (an NFS home) is fetched into from several login nodes: a partial named by
    another host's dyno-cli is being written there (its pid says nothing here), and removing it made that fetch
    fail. Partials carry their host now; this host's dead ones still go (review of the stale-partials fix)."""
    host, _ = daemons.start({TRACE})
    folder = tmp_path / TRACE / f"127.0.0.1_{host.port}"
    folder.mkdir(parents=True)
    dead = _dead_pid()
    theirs = folder / f".{TRACE}.1000.{dead}@other-login-node.part"
    theirs.write_bytes(b"in progress there")
    mine = folder / f".{TRACE}.1000.{dead}@{safe_host(socket.gethostname())}.part"
    mine.write_bytes(b"x" * 4096)
    _fetch(host, tmp_path)
    assert (folder / "node0_1000.json").is_file()
    assert theirs.exists() and not mine.exists()

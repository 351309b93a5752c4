"""dyno-cli turns SIGTERM into SIGINT (so that it ends a command as Ctrl-C does). A process whose SIGINT is ignored
(`dyno-cli ... &` from a non-interactive shell script: POSIX shells start background jobs with SIGINT ignored, and
nohup-like wrappers do the same) must still end on SIGTERM: re-raising an ignored SIGINT made SIGTERM do nothing at
all, so `kill $pid` (or a batch system stopping the job) no longer stopped it."""

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

pytestmark = pytest.mark.unit


@pytest.fixture
def daemons() -> Iterator[FakeDaemons]:
    d = FakeDaemons()
    yield d
    d.stop()


# What `cmd &` in a shell script does to the background job (SIG_IGN survives exec); not a preexec_fn, which forks
# this process while grpc's threads run
IGNORING_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "os.execv(sys.executable, [sys.executable, '-m', 'dyno.client', *sys.argv[1:]])"
)


def test_sigterm_ends_a_command_whose_sigint_is_ignored(daemons: FakeDaemons, tmp_path: Path) -> None:
    host, _ = daemons.start({"t-ign"}, finish_after=None)  # its processes never finish: fetch waits
    manifest = tmp_path / "t-ign" / "manifest.json"
    proc = subprocess.Popen(
        [sys.executable, "-c", IGNORING_SIGINT, "fetch", "--host", str(host), "--trace-id", "t-ign"]
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
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail("dyno-cli ignored SIGTERM (its SIGINT is ignored, and SIGTERM was re-raised as SIGINT)")
    finally:
        proc.kill()
        proc.wait()
    # as with Ctrl-C in a terminal: the manifest says interrupted, exit 130, no traceback
    assert proc.returncode == 130, err
    m = json.loads(manifest.read_text())
    assert m["status"] == "interrupted" and m["exit_code"] == 130
    assert "Traceback" not in err


@pytest.fixture
def sigint_ignored_sigterm_routed() -> Iterator[None]:
    from dyno.client.commands._interrupts import sigterm_as_ctrl_c

    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, sigterm_as_ctrl_c)
    yield
    signal.signal(signal.SIGINT, before[0])
    signal.signal(signal.SIGTERM, before[1])


def test_a_guard_holds_such_a_sigterm_back_like_a_ctrl_c(sigint_ignored_sigterm_routed: None) -> None:
    """Ctrl-C held back while the command cancels and writes manifest.json (InterruptGuard): with SIGINT ignored the
    guard did nothing, and the SIGTERM turned into a KeyboardInterrupt could cut a manifest write."""
    from dyno.client.commands._interrupts import InterruptGuard

    guard = InterruptGuard()
    with pytest.raises(KeyboardInterrupt):  # raised when the guard ends, as a held-back Ctrl-C
        with guard:
            signal.raise_signal(signal.SIGTERM)  # during a "manifest write": held back
            held = guard.pending
            guard.discard()
            with pytest.raises(KeyboardInterrupt):  # where the command waits, it is raised at once
                with guard.interruptible():
                    signal.raise_signal(signal.SIGTERM)
            signal.raise_signal(signal.SIGTERM)
    assert held
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # left as the shell set it

"""dyno-cli turns SIGTERM into SIGINT (so that it ends a command as Ctrl-C does). A process whose SIGINT is ignored
(`dyno-cli ... &` from a non-interactive shell script: POSIX shells start background jobs with SIGINT ignored, and
nohup-like wrappers do the same) must still end on SIGTERM: re-raising an ignored SIGINT made SIGTERM do nothing at
all, so `kill $pid` (or a batch system stopping the job) no longer stopped it."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fetch_cmd_fakes import FakeDaemons, sigterm_mid_fetch

pytestmark = pytest.mark.unit


# What `cmd &` in a shell script does to the background job (SIG_IGN survives exec); not a preexec_fn, which forks
# this process while grpc's threads run
IGNORING_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "os.execv(sys.executable, [sys.executable, '-m', 'dyno.client', *sys.argv[1:]])"
)


def test_sigterm_ends_a_command_whose_sigint_is_ignored(daemons: FakeDaemons, tmp_path: Path) -> None:
    code, manifest, err = sigterm_mid_fetch(daemons, tmp_path, "t-ign", [sys.executable, "-c", IGNORING_SIGINT])
    if code is None:
        pytest.fail("dyno-cli ignored SIGTERM (its SIGINT is ignored, and SIGTERM was re-raised as SIGINT)")
    # as with Ctrl-C in a terminal: the manifest says interrupted, exit 130, no traceback
    assert code == 130, err
    assert manifest["status"] == "interrupted" and manifest["exit_code"] == 130
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

"""InterruptGuard (dyno.client.commands._interrupts) with real SIGINTs sent to this process: held back outside
interruptible blocks and raised when the guard ends, raised at once inside them (or on entry when one was held
back), Python's handler restored afterwards, and no effect where the process ignores SIGINT."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fetch_cmd_fakes import PYTHON_M_DYNO_CLIENT, FakeDaemons, sigterm_mid_fetch

from dyno.client.cli import main as cli_main
from dyno.client.commands._interrupts import InterruptGuard

pytestmark = pytest.mark.unit


def _ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)  # the handler runs in this (the main) thread before kill returns to us


@pytest.fixture(autouse=True)
def _python_handler() -> Iterator[None]:
    """Python's own handler, as in a terminal (a background job's processes start with SIGINT ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_held_back_until_the_guard_ends(capsys: pytest.CaptureFixture[str]) -> None:
    steps = []
    with pytest.raises(KeyboardInterrupt), InterruptGuard("held, one moment"):
        _ctrl_c()
        steps.append("cancelled")  # what must not be cut still runs
        _ctrl_c()  # a second one says nothing more
        steps.append("manifest written")
    assert steps == ["cancelled", "manifest written"]
    assert capsys.readouterr().err == "held, one moment\n"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_raised_at_once_inside_an_interruptible_block_and_on_entry_when_held() -> None:
    with InterruptGuard() as guard:
        with pytest.raises(KeyboardInterrupt), guard.interruptible():
            _ctrl_c()
            pytest.fail("not interrupted")
        _ctrl_c()  # held: outside the block again
        assert guard.pending
        with pytest.raises(KeyboardInterrupt), guard.interruptible():
            pytest.fail("a held Ctrl-C must raise on entry")
        assert not guard.pending
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_discarded_ctrl_c_does_not_raise_at_the_end() -> None:
    with InterruptGuard() as guard:
        _ctrl_c()
        guard.discard()


def test_does_nothing_when_sigint_is_ignored_or_outside_the_main_thread() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with InterruptGuard() as guard:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            _ctrl_c()
            assert not guard.pending
    finally:
        signal.signal(signal.SIGINT, previous)
    errors: list[BaseException] = []

    def in_thread() -> None:
        try:
            with InterruptGuard():
                assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        except BaseException as e:  # reported to the main thread
            errors.append(e)

    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    assert errors == []


# dyno-cli turns SIGTERM into SIGINT (so that it ends a command as Ctrl-C does)


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


# SIGTERM (`timeout 60 dyno-cli ...`, a batch system stopping the job) ends `dyno-cli` as Ctrl-C does


def test_sigterm_writes_the_manifest_as_interrupted(daemons: FakeDaemons, tmp_path: Path) -> None:
    code, manifest, err = sigterm_mid_fetch(daemons, tmp_path, "t-term", PYTHON_M_DYNO_CLIENT)
    assert code == 130, err
    assert manifest["status"] == "interrupted" and manifest["exit_code"] == 130
    assert "Traceback" not in err


def test_main_in_process_leaves_sigterm_as_it_was(capsys: pytest.CaptureFixture[str]) -> None:
    before = signal.getsignal(signal.SIGTERM)
    cli_main(["status", "--host", "127.0.0.1:1", "--timeout-s", "0.5"])
    assert signal.getsignal(signal.SIGTERM) == before

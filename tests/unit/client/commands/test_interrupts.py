"""InterruptGuard (dyno.client.commands._interrupts) with real SIGINTs sent to this process: held back outside
interruptible blocks and raised when the guard ends, raised at once inside them (or on entry when one was held
back), Python's handler restored afterwards, and no effect where the process ignores SIGINT."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

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

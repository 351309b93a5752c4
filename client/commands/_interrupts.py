"""Ctrl-C (SIGINT) that cannot cut what must finish: once `dyno-cli trace` has sent StartTrace, a Ctrl-C must end
in the traces being cancelled and in a whole manifest.json. A KeyboardInterrupt can strike at any bytecode, e.g.
between two steps of the first manifest write, and skip both; so while a command holds an InterruptGuard, SIGINT
is only recorded, and raised as KeyboardInterrupt where the command waits and knows how to stop (the StartTrace
fan-out, following the hosts, the analysis: `interruptible()`). Everywhere else (cancelling, writing the manifest,
printing the summary) it is raised at the next interruptible wait, or when the guard ends."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import Any

__all__ = ["InterruptGuard", "sigterm_as_ctrl_c"]


def sigterm_as_ctrl_c(_signum: int, _frame: FrameType | None) -> None:
    """dyno-cli's SIGTERM handler: the command ends as on Ctrl-C. Re-raised as SIGINT, so that the handler in force
    (Python's, or an InterruptGuard's) decides; where SIGINT is ignored (`dyno-cli ... &` in a shell script: background
    jobs start so), the re-raised signal was swallowed and SIGTERM did nothing at all: a KeyboardInterrupt then, held
    back by a guard like a Ctrl-C (the guard takes SIGTERM itself in that case)."""
    if callable(signal.getsignal(signal.SIGINT)):
        signal.raise_signal(signal.SIGINT)
    else:
        raise KeyboardInterrupt


class InterruptGuard:
    """Holds SIGINT back for a `with` block (see the module). `held_message`: said on stderr, once, when a Ctrl-C
    is held back. Only the main thread can handle signals, and only Python's default handler is replaced: in
    another thread, or when SIGINT is ignored or handled by an embedding program, the guard does nothing; except
    that with SIGINT ignored, a SIGTERM that dyno-cli turns into a Ctrl-C (sigterm_as_ctrl_c) is held back."""

    def __init__(self, held_message: str = "") -> None:
        self.held_message = held_message
        self.pending = False  # a Ctrl-C arrived while held and was not raised yet
        self._raising = False
        self._told = False
        self._previous: Any = None
        self._signal = signal.SIGINT  # the one held back (SIGTERM where SIGINT is ignored: sigterm_as_ctrl_c)
        self._installed = False

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGINT)
            if previous is signal.default_int_handler:
                self._signal = signal.SIGINT
            elif previous == signal.SIG_IGN and signal.getsignal(signal.SIGTERM) is sigterm_as_ctrl_c:
                self._signal = signal.SIGTERM  # the only Ctrl-C this process can get
            else:
                return self
            self._previous = signal.getsignal(self._signal)
            signal.signal(self._signal, self._handle)
            self._installed = True
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._installed:
            signal.signal(self._signal, self._previous)
            self._installed = False
        if self.pending and exc_type is None:  # the Ctrl-C that was held back: the command ends as interrupted
            self.pending = False
            raise KeyboardInterrupt

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._raising:
            self._raising = False  # one KeyboardInterrupt per interruptible block
            raise KeyboardInterrupt
        self.pending = True
        if self.held_message and not self._told:
            self._told = True
            print(self.held_message, file=sys.stderr, flush=True)

    def discard(self) -> None:
        """Forget a Ctrl-C held back meanwhile (the command has already handled an interrupt)."""
        self.pending = False

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """A block where Ctrl-C raises KeyboardInterrupt at once; one held back before it raises on entry."""
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt
        self._raising = True
        try:
            yield
        finally:
            self._raising = False

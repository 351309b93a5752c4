"""Run dynod as a child process and wait until it is ready: shared by the demo, the tests and the benchmarks."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence

__all__ = ["DynodProcess", "DynodStartError", "READY_LINE"]

# The line dynod logs once it serves (daemon/main.py).
READY_LINE = re.compile(r"dynod \S+ ready: grpc=(?P<host>\S+):(?P<port>\d+) metrics=(?P<metrics>\S+)")


class DynodStartError(RuntimeError):
    """dynod exited or did not log its ready line in time; the message carries its log."""


class DynodProcess:
    """`python -m dyno.daemon ARGS` with its stderr collected in `lines` (and passed to `on_line`)."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        new_session: bool = False,
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self.args = list(args)
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.new_session = new_session
        self.on_line = on_line
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.is_ready = False
        self._ready = threading.Event()

    @property
    def log(self) -> str:
        return "".join(self.lines)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def _pump(self, proc: subprocess.Popen[str], ready: threading.Event) -> None:
        """Collect one process's stderr. `ready` is that start's own event: after a restart, the previous process's
        pump reaching EOF must not wake the new start's wait (which would fail the restart as "not ready")."""
        assert proc.stderr is not None
        for line in proc.stderr:
            self.lines.append(line)
            if self.on_line is not None:
                self.on_line(line)
            if READY_LINE.search(line) and proc is self.proc:
                self.is_ready = True
                ready.set()
        ready.set()  # stderr closed (the process is ending): wake the waiter, is_ready stays as it was

    def start(self, timeout_s: float = 30.0) -> DynodProcess:
        self._ready = threading.Event()
        self.is_ready = False
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dyno.daemon", *self.args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            start_new_session=self.new_session,
        )
        threading.Thread(target=self._pump, args=(self.proc, self._ready), daemon=True).start()
        self._ready.wait(timeout_s)
        if not self.is_ready or self.proc.poll() is not None:
            code = self.proc.poll()
            self.kill()
            raise DynodStartError(f"dynod did not become ready (exit {code}); log:\n{self.log}")
        return self

    def stop(self, timeout_s: float = 15.0) -> int:
        """SIGTERM, then SIGKILL after `timeout_s`; returns the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def restart(self, timeout_s: float = 30.0) -> DynodProcess:
        """Stop and start again with the same arguments (same ports, sockets, dirs)."""
        self.stop()
        return self.start(timeout_s)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

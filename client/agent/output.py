"""The files one agent trace writes into the daemon's trace folder, and how they are given up.

A trace is exported to `<path>.raw.tmp` (libkineto writes that through its own `<path>.raw.tmp.tmp`), copied
gzip-compressed into `<path>.tmp`, then renamed to `<path>`. When the program exits while that is under way and the
exit cannot wait any longer (agent.EXIT_FINISH_S), the trace is reported failed and its files are abandoned: every
one of them is removed, and from then on the writer creates and publishes nothing (it checks under the same lock
before each file it creates and before the rename). What the profiler's own export still writes after that (it runs
in C++ and cannot be stopped) is removed by the writer when the export returns, or, if the process ends first, by
dynod when the process is gone (daemon/tracing/leftovers.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dyno.trace_layout import agent_raw, agent_temporaries, agent_tmp

__all__ = ["OutputFiles", "TraceAbandoned", "unlink_quietly"]


class TraceAbandoned(Exception):
    """The trace was given up (the program is exiting); nothing of it may be written any more."""


def unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


class OutputFiles:
    """The final path of one trace and its temporary siblings, with the abandon switch. Thread-safe."""

    def __init__(self, output: Path) -> None:
        self.output = output
        self._lock = threading.Lock()
        self._abandoned = False

    @property
    def raw(self) -> Path:
        """Where the profiler exports its JSON."""
        return agent_raw(self.output)

    @property
    def tmp(self) -> Path:
        """The compressed copy being written, renamed to `output` when complete."""
        return agent_tmp(self.output)

    def temporaries(self) -> tuple[Path, ...]:
        """Every temporary file a trace may leave: the raw export, libkineto's own temp file of it, the copy."""
        return agent_temporaries(self.output)

    @property
    def abandoned(self) -> bool:
        return self._abandoned

    @contextmanager
    def creating(self) -> Iterator[None]:
        """Create or publish a file inside this block: raises TraceAbandoned once the trace was abandoned, and
        abandon() waits for the block to end, so no file appears after abandon() removed them."""
        with self._lock:
            if self._abandoned:
                raise TraceAbandoned(f"trace file {self.output} abandoned")
            yield

    def abandon(self) -> None:
        """Give the trace up: remove its files (the final one too) and refuse to create any from now on. Safe to
        call again (a second sweep removes what the profiler's export wrote meanwhile)."""
        with self._lock:
            self._abandoned = True
            for path in (*self.temporaries(), self.output):
                unlink_quietly(path)

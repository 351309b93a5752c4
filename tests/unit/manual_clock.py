"""A hand-set millisecond clock for the trace manager's tests (``clock.ms += 1000`` moves time)."""

from __future__ import annotations


class Clock:
    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.ms

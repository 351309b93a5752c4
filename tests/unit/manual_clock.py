"""Hand-set clocks: milliseconds for the trace manager's tests (``clock.ms += 1000`` moves time), and seconds that
advance at each read for the agent's step counter (a waiting loop sees time pass without sleeping)."""

from __future__ import annotations


class Clock:
    def __init__(self, ms: int = 1_700_000_000_000) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


class TickingClock:
    """Seconds; each read advances it by `tick` (``clock.t += 60`` moves it by hand)."""

    def __init__(self, tick: float = 0.0) -> None:
        self.t = 1000.0
        self.tick = tick

    def __call__(self) -> float:
        self.t += self.tick
        return self.t

"""The sampling loop after a priming tick: dynod takes one sample before starting the loop (rate counters primed,
data for the first queries); the loop's first tick must come one interval later, not at once."""

from __future__ import annotations

import threading

import pytest

from dyno.daemon.history import History
from dyno.daemon.loop import SamplingLoop
from dyno.daemon.samplers.base import Reading, SamplerState

pytestmark = pytest.mark.unit


class _Counting:
    name = "host"

    def __init__(self) -> None:
        self.calls = 0
        self.second = threading.Event()

    def state(self) -> SamplerState:
        return SamplerState(self.name, True, "fake")

    def sample(self) -> list[Reading]:
        self.calls += 1
        if self.calls >= 2:
            self.second.set()
        return [Reading("x", float(self.calls))]

    def close(self) -> None:
        pass


def test_the_loop_does_not_tick_again_right_after_a_priming_tick() -> None:
    """It did: two samples ~10 ms apart at every start, so the second one's rates (CPU %, network, disk, GPU GPM)
    were deltas over ~10 ms (cpu_user_percent 100.0 / cpu_system_percent 0.0 on a busy host)."""
    sampler = _Counting()
    loop = SamplingLoop([sampler], History(capacity=10), interval_s=3600.0)
    loop.tick()
    loop.start()
    try:
        assert not sampler.second.wait(0.5)  # before the fix: the loop's own first tick came within milliseconds
    finally:
        loop.stop()
    assert sampler.calls == 1 and loop.ticks == 1


def test_without_a_priming_tick_the_loop_samples_at_once() -> None:
    sampler = _Counting()
    loop = SamplingLoop([sampler], History(capacity=10), interval_s=0.05)
    loop.start()
    try:
        assert sampler.second.wait(10)
    finally:
        loop.stop()
    assert loop.ticks >= 2

"""Fixed-rate sampling loop: one thread, monotonic schedule, no drift, no burst after a stall."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from dyno.daemon.history import History, Sample
from dyno.daemon.samplers.base import Reading, Sampler

__all__ = ["SamplingLoop", "next_deadline"]

log = logging.getLogger(__name__)


def next_deadline(start: float, interval: float, now: float) -> float:
    """The first tick `start + k*interval` strictly after `now`: ticks stay on the original grid (no drift), and
    ticks missed during a stall are skipped rather than run back to back."""
    k = int((now - start) // interval) + 1
    return start + k * interval


class SamplingLoop:
    def __init__(
        self,
        samplers: Sequence[Sampler],
        history: History,
        interval_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._samplers = list(samplers)
        self._history = history
        self._interval = interval_s
        self._clock = clock
        self._wall = wall_clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ticks = 0
        self.missed_ticks = 0
        self.last_tick_duration_s = 0.0

    def tick(self) -> Sample:
        """Take one sample from every sampler; a sampler that raises loses its values for this tick only."""
        readings: list[Reading] = []
        t0 = self._clock()
        for sampler in self._samplers:
            try:
                readings.extend(sampler.sample())
            except Exception:  # one sampler's bug must never stop the loop
                log.exception("sampler %s failed", getattr(sampler, "name", sampler))
        sample = Sample(int(self._wall() * 1000), tuple(readings))
        self._history.append(sample)
        self.ticks += 1
        self.last_tick_duration_s = self._clock() - t0
        return sample

    def _run(self) -> None:
        start = self._clock()
        deadline = start
        while not self._stop.is_set():
            self.tick()
            now = self._clock()
            following = next_deadline(start, self._interval, now)
            self.missed_ticks += max(0, int(round((following - deadline) / self._interval)) - 1)
            deadline = following
            self._stop.wait(max(0.0, deadline - now))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="dyno-sampling", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

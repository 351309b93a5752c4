"""Fixed-rate sampling loop: one thread, monotonic schedule, no drift, no burst after a stall."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dyno.daemon.history import History, Sample
from dyno.daemon.samplers.base import Reading, Sampler, SamplerState

__all__ = ["STALL_S", "SamplingLoop", "Stall", "next_deadline"]

log = logging.getLogger(__name__)

# A sample() call running longer than this has stalled the loop (a sampler takes milliseconds; an NVML call on a GPU
# that fell off the bus, or a wedged driver, may never return): every sampler's values are then stale, and status
# and dyno_sampler_up say so instead of "ok" over the last values read.
STALL_S = 10.0


@dataclass(frozen=True)
class Stall:
    """The sampler whose sample() has not returned for `seconds` (more than the loop's stall limit)."""

    sampler: str
    seconds: float


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
        stall_s: float = STALL_S,
    ) -> None:
        self._samplers = list(samplers)
        self._history = history
        self._interval = interval_s
        self._clock = clock
        self._wall = wall_clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ticks = 0
        self._first_tick_at: float | None = None  # the grid's origin: the first tick, run by start() or before it
        self.missed_ticks = 0
        self.last_tick_duration_s = 0.0
        # sampler name -> (error text, failed ticks in a row) while its sample() keeps raising
        self._failing: dict[str, tuple[str, int]] = {}
        self._stall_s = stall_s
        self._in_flight: tuple[str, float] | None = None  # (sampler, clock at its sample() call) while one runs
        self._stall_logged = False
        self._stall_lock = threading.Lock()  # one ERROR per stall, whichever thread sees it first
        self._watchdog: threading.Thread | None = None
        self._on_first_tick: Callable[[], None] | None = None
        self._first_tick_done = threading.Event()
        self._tick_listeners: list[Callable[[Sample], None]] = []
        self._failing_listeners: set[int] = set()

    def add_tick_listener(self, listener: Callable[[Sample], None]) -> None:
        """Call `listener` with each sample on the loop's thread, after the history has it (job accounting). One
        that raises is logged once per failure episode and called again at the next tick."""
        self._tick_listeners.append(listener)

    def stall(self) -> Stall | None:
        """The sampler stuck in sample() for more than the stall limit, None while the loop is not stuck."""
        in_flight = self._in_flight
        if in_flight is None:
            return None
        seconds = self._clock() - in_flight[1]
        return Stall(in_flight[0], seconds) if seconds > self._stall_s else None

    def sampler_states(self) -> list[SamplerState]:
        """Each sampler's own state, turned unavailable (with the error) while its sample() raises, so status and
        dyno_sampler_up show a broken sampler as down rather than "ok" with no values; and every sampler's while
        one's sample() has not returned for more than the stall limit (none of them is sampled meanwhile)."""
        stall = self._report_stall()
        states = []
        for sampler in self._samplers:
            state = sampler.state()
            failing = self._failing.get(sampler.name)
            if failing is not None and state.ok:
                state = dataclasses.replace(state, ok=False, reason=f"sampling failed: {failing[0]}")
            if stall is not None and state.ok:
                if sampler.name == stall.sampler:
                    reason = (
                        f"sampling stalled: sample() has not returned for {stall.seconds:.0f} s (a hung driver call?)"
                    )
                else:
                    reason = (
                        f"not sampled for {stall.seconds:.0f} s: sampler {stall.sampler} has stalled the sampling loop"
                    )
                state = dataclasses.replace(state, ok=False, reason=reason)
            states.append(state)
        return states

    def _report_stall(self) -> Stall | None:
        """stall(), and the ERROR once per stall (status calls, scrapes and the watchdog all ask)."""
        stall = self.stall()
        if stall is None:
            return None
        with self._stall_lock:
            first = not self._stall_logged
            self._stall_logged = True
        if first:
            log.error(
                "sampler %s: sample() has not returned for %.0f s (a hung driver call?); no sampler is sampled until "
                "it does, and every one is reported down",
                stall.sampler,
                stall.seconds,
            )
        return stall

    def _watch(self) -> None:
        # The ERROR must not wait for a status call or a scrape (a host without Prometheus had none at all): the
        # loop's own thread is the one stuck, so another looks
        every = min(1.0, self._stall_s / 4)
        while not self._stop.wait(every):
            self._report_stall()

    def _sample_one(self, sampler: Sampler, readings: list[Reading]) -> None:
        name = sampler.name
        started = self._clock()
        self._in_flight = (name, started)
        try:
            readings.extend(sampler.sample())
        except Exception as e:  # one sampler's bug must never stop the loop
            failing = self._failing.get(name)
            self._failing[name] = (f"{type(e).__name__}: {e}", failing[1] + 1 if failing else 1)
            if failing is None:  # the traceback once per failure episode, not once per tick into the journal
                log.exception("sampler %s failed (its values are skipped until it recovers)", name)
            else:
                log.debug("sampler %s failed again: %s", name, self._failing[name][0])
            return
        finally:
            self._in_flight = None
            took = self._clock() - started
            if took > self._stall_s:
                log.warning("sampler %s: sample() returned after %.0f s; sampling resumes", name, took)
                self._stall_logged = False
        failing = self._failing.pop(name, None)
        if failing is not None:
            log.info("sampler %s recovered after %d failed ticks", name, failing[1])

    def tick(self) -> Sample:
        """Take one sample from every sampler; a sampler that raises loses its values for this tick only."""
        readings: list[Reading] = []
        t0 = self._clock()
        if self._first_tick_at is None:
            self._first_tick_at = t0
        for sampler in self._samplers:
            self._sample_one(sampler, readings)
        sample = Sample(int(self._wall() * 1000), tuple(readings))
        self._history.append(sample)
        for i, listener in enumerate(self._tick_listeners):
            try:
                listener(sample)
                self._failing_listeners.discard(i)
            except Exception:
                if i not in self._failing_listeners:
                    self._failing_listeners.add(i)
                    log.exception("after the sample: %r failed", listener)
        self.ticks += 1
        self.last_tick_duration_s = self._clock() - t0
        return sample

    def in_flight(self) -> str | None:
        """The sampler whose sample() is running now (stalled or not), None between samples."""
        in_flight = self._in_flight
        return in_flight[0] if in_flight is not None else None

    def _first_tick(self) -> None:
        try:
            self.tick()  # one that raises ends this thread as a later tick's would, but must not hold prime()
            # the callback before prime() returns (when the sample came in time): start-up lines stay in their order
            try:
                if self._on_first_tick is not None:
                    self._on_first_tick()
            except Exception:
                log.exception("after the first sample")
        finally:
            self._first_tick_done.set()

    def _run(self) -> None:
        # After a tick run before start() (the daemon primes the rate counters and the history with one), the next
        # is one interval later on that tick's grid: ticking at once made every rate of the second sample (CPU %,
        # network, disk, GPM) a delta over a few ms, quantised noise such as cpu 100% / 0%, and read NVML's GPM
        # counters again well within the 100 ms they need between samples.
        if self.ticks == 0 and not self._stop.is_set():
            self._first_tick()  # prime(): on this thread, so that the watchdog sees it stall
        start = self._clock() if self._first_tick_at is None else self._first_tick_at
        deadline = next_deadline(start, self._interval, self._clock())
        while not self._stop.wait(max(0.0, deadline - self._clock())):
            self.tick()
            now = self._clock()
            following = next_deadline(start, self._interval, now)
            self.missed_ticks += max(0, int(round((following - deadline) / self._interval)) - 1)
            deadline = following

    def start(self) -> None:
        """Sample from now on: at once, unless a tick was taken before (tick() or prime()), then one interval after
        it. Idempotent."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="dyno-sampling", daemon=True)
        self._watchdog = threading.Thread(target=self._watch, name="dyno-sampling-watchdog", daemon=True)
        self._watchdog.start()
        self._thread.start()

    def prime(self, on_first_tick: Callable[[], None] | None = None) -> bool:
        """Start the loop and wait for its first sample (rate counters primed, data for the first queries), at most
        the stall limit. The first sample is taken on the loop's thread with the watchdog already running: a hung
        driver call in it is reported as any stall is, and the caller goes on without it. Returns whether the first
        sample was taken; `on_first_tick` runs on the loop's thread once it is, whenever that is."""
        if self.ticks or self._thread is not None:
            raise RuntimeError("prime() is for a loop that has neither ticked nor started")
        self._on_first_tick = on_first_tick
        self.start()
        if self._first_tick_done.wait(self._stall_s):
            if self.ticks:
                return True
            log.error("the first sample failed (see the error above); dynod starts without sampling")
            return False
        in_flight = self.in_flight()
        log.warning(
            "sampler %s: the first sample has not returned within %.0f s (a hung driver call?); dynod starts without "
            "it, and every sampler is reported down until it returns",
            in_flight or "?",
            self._stall_s,
        )
        return False

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._watchdog is not None:
            self._watchdog.join(timeout)
        if self._thread is not None:
            self._thread.join(timeout)

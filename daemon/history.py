"""Bounded in-memory history of samples, with subscribers for live streams."""

from __future__ import annotations

import fnmatch
import queue
import threading
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dyno.daemon.samplers.base import Reading

__all__ = ["Sample", "History", "Subscription", "name_filter"]


@dataclass(frozen=True, slots=True)
class Sample:
    """All readings of one sampling tick."""

    timestamp_ms: int
    readings: tuple[Reading, ...]


def name_filter(patterns: Sequence[str]):
    """A predicate on metric names for fnmatch-style patterns; no patterns means everything."""
    if not patterns:
        return lambda name: True
    exact = {p for p in patterns if not any(c in p for c in "*?[")}
    globs = [p for p in patterns if p not in exact]
    return lambda name: name in exact or any(fnmatch.fnmatchcase(name, g) for g in globs)


def _filtered(sample: Sample, keep) -> Sample:
    return Sample(sample.timestamp_ms, tuple(r for r in sample.readings if keep(r.name)))


class Subscription:
    """A bounded queue of new samples for one live stream; a slow reader loses the oldest, never blocks the loop."""

    def __init__(self, history: History, maxsize: int = 64) -> None:
        self._history = history
        self._queue: queue.Queue[Sample | None] = queue.Queue(maxsize)

    def put(self, sample: Sample) -> None:
        while True:
            try:
                self._queue.put_nowait(sample)
                return
            except queue.Full:
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    pass

    def get(self, timeout: float) -> Sample | None:
        """The next sample, or None after `timeout` seconds (so callers can check for cancellation)."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self._history.unsubscribe(self)


class History:
    """Ring of the last `capacity` samples. Appends are O(1); memory is bounded by the capacity."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self._ring: deque[Sample] = deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._subscribers: set[Subscription] = set()
        self.capacity = capacity

    def append(self, sample: Sample) -> None:
        with self._lock:
            self._ring.append(sample)
            subscribers = list(self._subscribers)
        for sub in subscribers:
            sub.put(sample)

    def __len__(self) -> int:
        return len(self._ring)

    def latest(self) -> Sample | None:
        with self._lock:
            return self._ring[-1] if self._ring else None

    def query(self, names: Sequence[str] = (), since_ms: int = 0, limit: int = 0) -> list[Sample]:
        """Samples newer than `since_ms` (oldest first), the newest `limit` of them, readings filtered by name."""
        with self._lock:
            snapshot: Iterable[Sample] = list(self._ring)
        selected = [s for s in snapshot if s.timestamp_ms > since_ms]
        if limit > 0:
            selected = selected[-limit:]
        if not names:
            return selected
        keep = name_filter(names)
        return [_filtered(s, keep) for s in selected]

    def subscribe(self, maxsize: int = 64) -> Subscription:
        sub = Subscription(self, maxsize)
        with self._lock:
            self._subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            self._subscribers.discard(sub)

"""Bounded in-memory history of samples, with subscribers for live streams.

Samples are stored compactly: each series (name + labels) is interned once in a SeriesTable, and a stored sample
is two flat arrays (series ids, values), the ids array shared with the previous sample when the set of series
did not change (the usual case). An hour of 1 s samples of 8 GPUs (~270 values each) takes ~8 MB this way,
against ~75 MB as Reading objects, and adds no objects for the garbage collector to walk.
"""

from __future__ import annotations

import fnmatch
import logging
import queue
import threading
from array import array
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dyno.daemon.samplers.base import Labels, Reading

__all__ = ["Sample", "StoredSample", "SeriesTable", "History", "Subscription", "name_filter"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Sample:
    """All readings of one sampling tick."""

    timestamp_ms: int
    readings: tuple[Reading, ...]


def name_filter(patterns: Sequence[str]) -> Callable[[str], bool]:
    """A predicate on metric names for fnmatch-style patterns; no patterns means everything."""
    if not patterns:
        return lambda name: True
    exact = {p for p in patterns if not any(c in p for c in "*?[")}
    globs = [p for p in patterns if p not in exact]
    return lambda name: name in exact or any(fnmatch.fnmatchcase(name, g) for g in globs)


@dataclass(frozen=True, slots=True)
class StoredSample:
    """One sample as kept in the ring: series ids (into the History's SeriesTable) and their values."""

    timestamp_ms: int
    ids: array  # 'I'
    values: array  # 'd'


class SeriesTable:
    """Interns (name, labels) -> a dense series id. Written only by the sampling thread; ids never change."""

    MAX_SERIES = 100_000  # bounded: a source that invents series without end is cut off, loudly

    def __init__(self) -> None:
        self._ids: dict[tuple[str, Labels], int] = {}
        self.keys: list[tuple[str, Labels]] = []
        self._warned = False

    def __len__(self) -> int:
        return len(self.keys)

    def id_of(self, name: str, labels: Labels) -> int | None:
        key = (name, labels)
        i = self._ids.get(key)
        if i is None:
            if len(self.keys) >= self.MAX_SERIES:
                if not self._warned:
                    log.warning("more than %d distinct series: new ones are not kept in history", self.MAX_SERIES)
                    self._warned = True
                return None
            i = len(self.keys)
            self.keys.append(key)
            self._ids[key] = i
        return i

    def matching(self, patterns: Sequence[str]) -> set[int] | None:
        """Ids of the series whose name matches; None (everything) for no patterns."""
        if not patterns:
            return None
        keep = name_filter(patterns)
        return {i for i, (name, _labels) in enumerate(list(self.keys)) if keep(name)}


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
        self._ring: deque[StoredSample] = deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._subscribers: set[Subscription] = set()
        self._latest: Sample | None = None
        self._last_ids = array("I")
        self.series = SeriesTable()
        self.capacity = capacity

    def append(self, sample: Sample) -> None:
        id_of = self.series.id_of
        ids: list[int] = []
        values: list[float] = []
        for r in sample.readings:
            i = id_of(r.name, r.labels)
            if i is not None:
                ids.append(i)
                values.append(r.value)
        packed = array("I", ids)
        if packed == self._last_ids:
            packed = self._last_ids  # share: the set of series rarely changes between ticks
        else:
            self._last_ids = packed
        stored = StoredSample(sample.timestamp_ms, packed, array("d", values))
        with self._lock:
            self._ring.append(stored)
            self._latest = sample
            subscribers = list(self._subscribers)
        for sub in subscribers:
            sub.put(sample)

    def __len__(self) -> int:
        return len(self._ring)

    def latest(self) -> Sample | None:
        return self._latest

    def stored(self, since_ms: int = 0, limit: int = 0) -> list[StoredSample]:
        """Stored samples newer than `since_ms` (oldest first), the newest `limit` of them (0: all)."""
        with self._lock:
            snapshot = list(self._ring)
        selected = [s for s in snapshot if s.timestamp_ms > since_ms]
        return selected[-limit:] if limit > 0 else selected

    def query(self, names: Sequence[str] = (), since_ms: int = 0, limit: int = 0) -> list[Sample]:
        """Like stored(), as Samples of Readings, filtered by metric name patterns."""
        keep = self.series.matching(names)
        keys = self.series.keys
        out = []
        for s in self.stored(since_ms, limit):
            readings = tuple(
                Reading(keys[i][0], v, keys[i][1])
                for i, v in zip(s.ids, s.values, strict=True)
                if keep is None or i in keep
            )
            out.append(Sample(s.timestamp_ms, readings))
        return out

    def subscribe(self, maxsize: int = 64) -> Subscription:
        sub = Subscription(self, maxsize)
        with self._lock:
            self._subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            self._subscribers.discard(sub)

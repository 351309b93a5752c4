"""Bounded in-memory history of samples, with subscribers for live streams.

Samples are stored compactly: each series (name + labels) is interned once in a SeriesTable, and a stored sample
is two flat arrays (series ids, values), the ids array shared with the previous sample when the set of series
did not change (the usual case). An hour of 1 s samples of 8 GPUs (~270 values each) takes ~8 MB this way,
against ~75 MB as Reading objects, and adds no objects for the garbage collector to walk.

Bounded twice: at most `capacity` samples (history_s / interval_s) and at most `max_bytes` of sample storage
(MAX_HISTORY_BYTES), whichever is reached first: at interval_s 0.1 the samples of an hour take ten times the memory
of 1 s, and history_s / interval_s may be up to 1,000,000 samples, far past the unit's MemoryMax. Past the budget
the oldest samples go first, so the window kept is shorter than history_s (dynod logs it once at start).
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

from dyno.daemon.config import DEFAULT_HISTORY_MAX_BYTES
from dyno.daemon.samplers.base import Labels, Reading

__all__ = [
    "MAX_HISTORY_BYTES",
    "Sample",
    "StoredSample",
    "SeriesTable",
    "History",
    "Subscription",
    "name_filter",
]

log = logging.getLogger(__name__)

# Sample storage the history may take by default (dynod's history_max_bytes; why this size: dyno.daemon.config).
MAX_HISTORY_BYTES = DEFAULT_HISTORY_MAX_BYTES
# What one stored sample costs besides its arrays' items: the StoredSample (slots), its timestamp int, two array
# headers, the deque's slot and malloc's rounding (bench/history_memory.py measures it against RSS).
SAMPLE_OVERHEAD_BYTES = 200


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


def _values_cost(s: StoredSample) -> int:
    return SAMPLE_OVERHEAD_BYTES + s.values.itemsize * len(s.values)


def _ids_cost(ids: array) -> int:
    return ids.itemsize * len(ids)


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
    """Ring of the last `capacity` samples, at most `max_bytes` of them. Appends are O(1) (amortized)."""

    def __init__(self, capacity: int, *, max_bytes: int | None = None) -> None:
        """`max_bytes` None: MAX_HISTORY_BYTES."""
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self._ring: deque[StoredSample] = deque()
        self.max_bytes = MAX_HISTORY_BYTES if max_bytes is None else max_bytes
        self._bytes = 0  # sample storage now: values, each distinct ids array once, per-sample overhead
        self._last_cost = 0  # the newest sample's cost without its ids array (shared in the steady state)
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
            while self._ring and (
                len(self._ring) >= self.capacity or self._bytes + self._cost(stored) > self.max_bytes
            ):
                self._evict_oldest()
            self._bytes += self._cost(stored)
            self._ring.append(stored)
            self._last_cost = _values_cost(stored)  # a steady sample shares the ids array of the one before
            self._latest = sample
            subscribers = list(self._subscribers)
        for sub in subscribers:
            sub.put(sample)

    def _cost(self, new: StoredSample) -> int:
        """Under self._lock: what appending `new` adds, its ids array unless the newest sample shares it."""
        shared = bool(self._ring) and self._ring[-1].ids is new.ids
        return _values_cost(new) + (0 if shared else _ids_cost(new.ids))

    def _evict_oldest(self) -> None:
        """Under self._lock. An ids array is shared by a run of consecutive samples: it was counted with the first of
        them and goes with the last."""
        old = self._ring.popleft()
        self._bytes -= _values_cost(old)
        if not self._ring or self._ring[0].ids is not old.ids:
            self._bytes -= _ids_cost(old.ids)

    def __len__(self) -> int:
        return len(self._ring)

    @property
    def bytes_used(self) -> int:
        """Sample storage now, in bytes (the measure `max_bytes` bounds)."""
        with self._lock:
            return self._bytes

    @property
    def sample_bytes(self) -> int:
        """What one more sample like the newest takes in the steady state (its ids array shared); 0 before any."""
        with self._lock:
            return self._last_cost

    def fitting_len(self) -> int:
        """How many samples like the newest the history keeps: `capacity`, or fewer when the byte budget is reached
        first (`capacity` before the first sample)."""
        with self._lock:
            cost = self._last_cost
        return self.capacity if cost == 0 else max(1, min(self.capacity, self.max_bytes // cost))

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

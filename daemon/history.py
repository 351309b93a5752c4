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
import time
from array import array
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import islice

from dyno.daemon.config import DEFAULT_HISTORY_MAX_BYTES
from dyno.daemon.samplers.base import Labels, Reading

__all__ = [
    "FORGET_AFTER_S",
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
# A series no stored sample names any more is forgotten this long after: GetMetrics encodes a snapshot of samples
# taken a moment before, which may still name it (its answer is bounded by the call's deadline, far shorter).
FORGET_AFTER_S = 60.0


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
    """Interns (name, labels) -> a series id. Written only by the sampling thread. An id is never reused: a series
    no stored sample names any more is forgotten (History decides when), and one that comes back gets a new id, so a
    reader holding older samples never sees another series' name on its values."""

    MAX_SERIES = 100_000  # bounded: a source that invents series without end is cut off, loudly

    def __init__(self) -> None:
        self._ids: dict[tuple[str, Labels], int] = {}
        self._keys: dict[int, tuple[str, Labels]] = {}
        self._next = 0
        self._warned = False

    def __len__(self) -> int:
        return len(self._keys)

    def id_of(self, name: str, labels: Labels) -> int | None:
        key = (name, labels)
        i = self._ids.get(key)
        if i is None:
            if len(self._keys) >= self.MAX_SERIES:
                if not self._warned:
                    log.warning("more than %d distinct series: new ones are not kept in history", self.MAX_SERIES)
                    self._warned = True
                return None
            i = self._next
            self._next += 1
            self._keys[i] = key
            self._ids[key] = i
        return i

    def key(self, i: int) -> tuple[str, Labels] | None:
        """The (name, labels) of series `i`, None once forgotten."""
        return self._keys.get(i)

    def forget(self, ids: Sequence[int]) -> None:
        """Drop these series (no stored sample names them any more): a host whose devices come and go under new
        names (a pod's interface, eni<hash>) would otherwise grow the table for months and, past MAX_SERIES, keep no
        new series at all."""
        for i in ids:
            key = self._keys.pop(i, None)
            if key is not None:
                del self._ids[key]

    def matching(self, patterns: Sequence[str]) -> set[int] | None:
        """Ids of the series whose name matches; None (everything) for no patterns."""
        if not patterns:
            return None
        keep = name_filter(patterns)
        return {i for i, (name, _labels) in list(self._keys.items()) if keep(name)}


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

    def __init__(
        self, capacity: int, *, max_bytes: int | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
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
        self._clock = clock
        # series id -> runs of samples in the ring that name it (a run shares one ids array): at 0 the series is in
        # no stored sample, and is forgotten FORGET_AFTER_S later unless it came back meanwhile
        self._runs: dict[int, int] = {}
        self._idle: dict[int, float] = {}  # series in no stored sample -> since when (oldest first)

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
            if not self._ring or self._ring[-1].ids is not stored.ids:  # a new run
                for i in stored.ids:
                    runs = self._runs.get(i, 0)
                    if runs == 0:
                        self._idle.pop(i, None)  # back before it was forgotten
                    self._runs[i] = runs + 1
            self._ring.append(stored)
            self._last_cost = _values_cost(stored)  # a steady sample shares the ids array of the one before
            self._latest = sample
            subscribers = list(self._subscribers)
        for sub in subscribers:
            sub.put(sample)
        self._forget_unused()

    def _forget_unused(self) -> None:
        """On the sampling thread (the series table's only writer): forget the series that have been in no stored
        sample for FORGET_AFTER_S."""
        if not self._idle:
            return
        cutoff = self._clock() - FORGET_AFTER_S
        gone: list[int] = []
        with self._lock:
            for i, since in self._idle.items():
                if since > cutoff:
                    break
                gone.append(i)
            for i in gone:
                del self._idle[i]
        if gone:
            self.series.forget(gone)

    def _cost(self, new: StoredSample) -> int:
        """Under self._lock: what appending `new` adds, its ids array unless the newest sample shares it."""
        shared = bool(self._ring) and self._ring[-1].ids is new.ids
        return _values_cost(new) + (0 if shared else _ids_cost(new.ids))

    def _evict_oldest(self) -> None:
        """Under self._lock. An ids array is shared by a run of consecutive samples: it was counted with the first of
        them and goes with the last."""
        old = self._ring.popleft()
        self._bytes -= _values_cost(old)
        if not self._ring or self._ring[0].ids is not old.ids:  # the last sample of its run
            self._bytes -= _ids_cost(old.ids)
            now = self._clock()
            for i in old.ids:
                runs = self._runs.pop(i) - 1
                if runs:
                    self._runs[i] = runs
                else:
                    self._idle[i] = now

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
        """Stored samples newer than `since_ms` (oldest first), the newest `limit` of them (0: all). With a limit,
        only the newest end of the ring is walked: a monitoring poll (GetMetrics(limit=10)) copied and filtered the
        whole ring, tens of thousands of samples in a long history, for every call."""
        if limit > 0:
            with self._lock:
                newest = list(islice((s for s in reversed(self._ring) if s.timestamp_ms > since_ms), limit))
            newest.reverse()
            return newest
        with self._lock:
            snapshot = list(self._ring)
        return [s for s in snapshot if s.timestamp_ms > since_ms]

    def query(self, names: Sequence[str] = (), since_ms: int = 0, limit: int = 0) -> list[Sample]:
        """Like stored(), as Samples of Readings, filtered by metric name patterns."""
        keep = self.series.matching(names)
        key = self.series.key
        out = []
        for s in self.stored(since_ms, limit):
            named = ((key(i), v) for i, v in zip(s.ids, s.values, strict=True) if keep is None or i in keep)
            readings = tuple(Reading(k[0], v, k[1]) for k, v in named if k is not None)
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

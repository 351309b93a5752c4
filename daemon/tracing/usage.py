"""The trace dir's size for GetStatus, as the last retention pass measured it.

Walking the trace dir on every GetStatus cost a stat per file (thousands with many traces) on the RPC thread. The
retention pass walks it anyway (every 30 s), so it records the figure here and GetStatus reads it: O(1). The
figure is at most `max_age_s` old: when no pass has recorded one for that long (housekeeping not started yet, or
stuck on a slow filesystem), the next reader measures it itself, one walk at a time, and the others wait for that
walk rather than starting their own.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from pathlib import Path

from dyno.daemon.tracing.retention import tree_size

__all__ = ["TraceDirUsage"]


class TraceDirUsage:
    def __init__(
        self,
        trace_dir: Path,
        max_age_s: float,
        *,
        measure: Callable[[Path], int] = tree_size,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._trace_dir = trace_dir
        self._max_age_s = max_age_s
        self._measure = measure
        self._clock = clock
        self._lock = threading.Lock()  # guards the figure; never held during a walk
        self._walk = threading.Lock()  # one walk at a time
        self._bytes = 0
        self._at = -math.inf

    def record(self, total_bytes: int) -> None:
        """The size a walk just found (the retention pass's `dir_bytes`)."""
        with self._lock:
            self._bytes, self._at = total_bytes, self._clock()

    def _fresh(self) -> int | None:
        with self._lock:
            return self._bytes if self._clock() - self._at <= self._max_age_s else None

    def bytes(self) -> int:
        """Bytes under the trace dir, at most `max_age_s` old."""
        fresh = self._fresh()
        if fresh is not None:
            return fresh
        with self._walk:
            fresh = self._fresh()  # measured by whoever held the walk before us
            if fresh is not None:
                return fresh
            size = self._measure(self._trace_dir)
            self.record(size)
            return size

"""Warnings that others can trigger at will (a local user's malformed datagrams, a daemon that keeps refusing)
are logged at most once per interval per kind; the rest go to DEBUG and are counted in the next warning."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["ThrottledLog"]


class ThrottledLog:
    """`warning(key, msg, *args)` (or `emit`, for a `level` other than WARNING): a line at `level` at most every
    `every_s` per key, DEBUG in between (`every_s` inf: once per key). At most `max_keys` keys are remembered (the
    least recently logged is forgotten first), so keys that others choose (a file's identity) cannot grow it without
    bound. `emit_built` takes the args as a function, called only for a line that is logged."""

    def __init__(
        self,
        logger: logging.Logger,
        every_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 1024,
        level: int = logging.WARNING,
    ) -> None:
        self._logger = logger
        self._level = level
        self._every_s = every_s
        self._clock = clock
        self._max_keys = max_keys
        self._lock = threading.Lock()
        self._last: OrderedDict[str, float] = OrderedDict()
        self._held: dict[str, int] = {}

    def warning(self, key: str, msg: str, *args: Any) -> None:
        self.emit(key, msg, *args)

    def emit(self, key: str, msg: str, *args: Any) -> None:
        """The line at this log's level (WARNING unless given), throttled per key."""
        self.emit_built(key, msg, lambda: args)

    def emit_built(self, key: str, msg: str, build_args: Callable[[], tuple[Any, ...]]) -> None:
        """emit() whose args cost something to build: `build_args()` is called only when the line is logged, not
        for one held back (unless DEBUG is on) nor below the logger's level."""
        now = self._clock()
        with self._lock:
            since = now - self._last.get(key, now - self._every_s)
            if since < self._every_s:
                self._held[key] = self._held.get(key, 0) + 1
                held = -1
            else:
                self._last[key] = now
                self._last.move_to_end(key)
                held = self._held.pop(key, 0)
                while len(self._last) > self._max_keys:
                    self._held.pop(self._last.popitem(last=False)[0], None)
        level = logging.DEBUG if held < 0 else self._level
        if not self._logger.isEnabledFor(level):
            return
        if held > 0:
            self._logger.log(level, msg + " (and %d more like it in the last %.0f s)", *build_args(), held, since)
        else:
            self._logger.log(level, msg, *build_args())

"""Deltas of cumulative counters between two samples, shared by the samplers that turn counters into rates.

Kernel and NVML counters only grow, except when they wrap (32-bit counters of some NIC drivers), when a device
disappears and comes back, or when a CPU is hot-plugged. A decrease is therefore never a meaningful delta: the
key is re-primed and skipped for that interval instead of emitting a huge or negative spike.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

__all__ = ["CounterDeltas"]


class CounterDeltas:
    """Remembers the last values per key; `update` returns the element-wise deltas since the previous call.

    Keys not updated in a round are forgotten by `end_round`, so devices that vanish do not accumulate.
    """

    def __init__(self) -> None:
        self._prev: dict[Hashable, tuple[int, ...]] = {}
        self._seen: set[Hashable] = set()

    def update(self, key: Hashable, values: Sequence[int]) -> tuple[int, ...] | None:
        """Deltas since the previous values of `key`, or None on the first sight of the key or after a reset."""
        current = tuple(values)
        self._seen.add(key)
        previous = self._prev.get(key)
        self._prev[key] = current
        if previous is None or len(previous) != len(current):
            return None
        deltas = tuple(c - p for c, p in zip(current, previous, strict=True))
        if any(d < 0 for d in deltas):
            return None  # wrap or reset: re-primed above, skip this interval
        return deltas

    def end_round(self) -> None:
        """Forget keys that were not updated since the last `end_round` (removed devices, offlined CPUs)."""
        for key in self._prev.keys() - self._seen:
            del self._prev[key]
        self._seen.clear()

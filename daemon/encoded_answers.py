"""Encoded answers kept while what they encode is the same objects: a repeated request costs a lookup.

**Why:** with 1,000 registered processes and 50 callers polling ListProcesses and GetMetrics back to back, each
answer built anew cost ~2 ms of dynod's one GIL (messages copied, then serialized), and the Dyno server saturated. A
sample (GetMetrics) or a process record (ListProcesses) is a frozen object, replaced when it changes, so an answer
whose inputs are the very same objects is the very same bytes.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence

__all__ = ["EncodedAnswers"]


class EncodedAnswers:
    """At most `max_entries` encoded answers of at most `max_answer_bytes` each (a polled answer is small; a
    history page of up to 4 MiB is not kept: dynod's memory is budgeted), each under a request key, valid while its
    inputs are the same objects (compared by identity, in order) as when it was built. Thread-safe; a miss is built
    by the caller."""

    def __init__(self, max_entries: int = 32, max_answer_bytes: int = 256 << 10) -> None:
        self._max = max_entries
        self._max_answer = max_answer_bytes
        self._lock = threading.Lock()
        self._entries: dict[Hashable, tuple[tuple[object, ...], bytes]] = {}

    def get(self, key: Hashable, inputs: Sequence[object]) -> bytes | None:
        with self._lock:
            hit = self._entries.get(key)
        if hit is None or len(hit[0]) != len(inputs) or not all(a is b for a, b in zip(hit[0], inputs, strict=True)):
            return None
        return hit[1]

    def put(self, key: Hashable, inputs: Sequence[object], answer: bytes) -> None:
        if len(answer) > self._max_answer:
            return
        with self._lock:
            if key not in self._entries and len(self._entries) >= self._max:
                self._entries.clear()  # many distinct requests: start over rather than keep an order
            self._entries[key] = (tuple(inputs), answer)

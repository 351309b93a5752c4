"""Encoded answers kept while what they encode is the same objects: a repeated request costs a lookup.

**Why:** with 1,000 registered processes and 50 callers polling ListProcesses and GetMetrics back to back, each
answer built anew cost ~2 ms of dynod's one GIL (messages copied, then serialized), and the Dyno server saturated. A
sample (GetMetrics) or a process record (ListProcesses) is a frozen object, replaced when it changes, so an answer
whose inputs are the very same objects is the very same bytes. The budget is in bytes, not answers: the last ten
samples of 8 GPUs (`GetMetrics(limit=10)`, a monitoring poll) are ~320 KB, which a per-answer cap of 256 KiB never
kept (half of dynod's GIL went into building that answer again for every call, bench/registry_scale.py).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence

__all__ = ["EncodedAnswers", "MAX_ANSWER_BYTES", "MAX_CACHED_BYTES"]

MAX_CACHED_BYTES = 8 << 20  # all the answers kept, at most (dynod's memory is budgeted: memlimit.BASELINE_BYTES)
MAX_ANSWER_BYTES = 1 << 20  # a larger answer (a history page of up to 4 MiB) is built for each call


class EncodedAnswers:
    """At most `max_entries` encoded answers of at most `max_answer_bytes` each and `max_bytes` together, each under
    a request key, valid while its inputs are the same objects (compared by identity, in order) as when it was
    built. Thread-safe; a miss is built by the caller."""

    def __init__(
        self, max_entries: int = 32, max_answer_bytes: int = MAX_ANSWER_BYTES, max_bytes: int = MAX_CACHED_BYTES
    ) -> None:
        self._max = max_entries
        self._max_answer = max_answer_bytes
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._entries: dict[Hashable, tuple[tuple[object, ...], bytes]] = {}
        self._bytes = 0

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
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= len(old[1])
            if len(self._entries) >= self._max or self._bytes + len(answer) > self._max_bytes:
                self._entries.clear()  # many distinct requests: start over rather than keep an order
                self._bytes = 0
            self._entries[key] = (tuple(inputs), answer)
            self._bytes += len(answer)

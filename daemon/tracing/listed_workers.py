"""Which kineto processes the process list shows as DataLoader workers: /proc reads, each at most once per
LISTED_WORKERS_MAX_AGE_MS until it is a worker (which it stays). ListProcesses, which shows the roles, is what
monitoring polls; ~500 reads per call took ~18 ms of the GIL. A trace request reads them fresh."""

from __future__ import annotations

from collections.abc import Callable

from dyno.daemon.registered_process import RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.kineto_identity import KinetoIdentifier

__all__ = ["LISTED_WORKERS_MAX_AGE_MS", "ListedWorkers"]

# how old a "not a DataLoader worker (yet)" may be (torch names a worker once its loop runs)
LISTED_WORKERS_MAX_AGE_MS = 1000


class ListedWorkers:
    def __init__(self, registry: ProcessRegistry, identifier: KinetoIdentifier, clock_ms: Callable[[], int]) -> None:
        self._registry = registry
        self._identifier = identifier
        self._clock_ms = clock_ms
        self._memo: dict[int, tuple[int, int, bool]] = {}  # pid -> (start time, checked at ms, is a worker)

    def workers(self, procs: list[RegisteredProcess]) -> set[int]:
        """Pids of the DataLoader workers among `procs` (kineto processes)."""
        now = self._clock_ms()
        memo = self._memo
        found = set()
        for p in procs:
            hit = memo.get(p.pid)
            if hit is None or hit[0] != p.start_time or (not hit[2] and now - hit[1] >= LISTED_WORKERS_MAX_AGE_MS):
                memo[p.pid] = hit = (p.start_time, now, self._identifier.is_data_worker(p.pid))
            if hit[2]:
                found.add(p.pid)
        if len(memo) > 2 * len(self._registry) + 64:  # bounded by the registry: forget the pids it no longer has
            self._memo = {pid: e for pid, e in list(memo.items()) if self._registry.get(pid) is not None}
        return found

"""What a trace request of many processes does while it holds the trace manager's lock, which libkineto's polls take
too (they wait ~90 ms for a reply): each process's part is made before the lock is taken, and a trace's record view
is built once per write, not once per process that ended (that was O(processes^2): ~100 ms for one CancelTrace of
1,000 processes)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from dyno.daemon.registered_process import PROTOCOL_AGENT, PROTOCOL_KINETO, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.table import TraceTable
from dyno.daemon.tracing.values import TraceSpec

pytestmark = pytest.mark.unit

PROCESSES = 1000


class _WatchedLock:
    """The manager's lock, telling whether the current thread holds it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.owner: int | None = None

    def __enter__(self) -> None:
        self._lock.acquire()
        self.owner = threading.get_ident()

    def __exit__(self, *exc: Any) -> None:
        self.owner = None
        self._lock.release()

    def held(self) -> bool:
        return self.owner == threading.get_ident()


def _manager(tmp_path: Path) -> tuple[TraceManager, _WatchedLock]:
    reg = ProcessRegistry(is_alive=lambda pid: True, uid_of=lambda pid: 1000, max_per_uid=PROCESSES)
    for i in range(PROCESSES):
        protocol = PROTOCOL_KINETO if i % 2 else PROTOCOL_AGENT
        reg.register(RegisteredProcess(pid=200_000 + i, job_id="7", protocol=protocol, rank=i))
    tm = TraceManager(reg, tmp_path / "traces", "hostW")
    lock = _WatchedLock()
    tm.table.lock = lock  # type: ignore[assignment]
    return tm, lock


def test_a_trace_of_many_processes_makes_their_parts_outside_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tm, lock = _manager(tmp_path)
    made_under_lock = []
    original = TraceManager._new_proc_trace

    def watched(self: TraceManager, *args: Any) -> Any:
        made_under_lock.append(lock.held())
        return original(self, *args)

    monkeypatch.setattr(TraceManager, "_new_proc_trace", watched)
    result = tm.start(TraceSpec(job_id="7", duration_ms=1000))
    assert len(result.triggered) == PROCESSES
    assert len(made_under_lock) == PROCESSES and not any(made_under_lock)


def test_cancelling_a_trace_of_many_processes_builds_its_record_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tm, _ = _manager(tmp_path)
    result = tm.start(TraceSpec(job_id="7", duration_ms=1000))
    views = []
    original = TraceTable.view

    def counted(trace: Any) -> Any:
        views.append(trace.trace_id)
        return original(trace)

    monkeypatch.setattr(TraceTable, "view", staticmethod(counted))
    cancelled = tm.cancel(result.trace_id)
    assert cancelled.finished and len(cancelled.processes) == PROCESSES
    assert len(views) <= 3  # the record written once, and the answer (not one view per process that ended)
    assert tm.get(result.trace_id).finished  # the record on disk and in memory agree it ended

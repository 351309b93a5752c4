"""The trace manager's state: the traces it knows (each with its processes' states), the lock that guards them and
the state changes every protocol makes. TraceManager (trace_manager.py) is this table with the libkineto side
(trace_kineto.py), the agent side (trace_agents.py), requests, queries and housekeeping.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from dyno.daemon.registry import PROTOCOL_AGENT, ProcessRecord, ProcessRegistry, now_ms
from dyno.daemon.tracing import files as tf
from dyno.daemon.tracing import journal as tj
from dyno.daemon.tracing.kineto_identity import KinetoIdentifier
from dyno.daemon.tracing.values import (
    FINAL_STATES,
    AgentCommand,
    ProcessTraceView,
    TraceSpec,
    TraceState,
    TraceView,
    UnknownTraceError,
)

__all__ = ["ProcTrace", "RESUMED_TIMEOUT", "TraceEntry", "TraceTable"]

log = logging.getLogger(__name__)

_RESTARTED_KINETO = (
    "dynod restarted mid-trace: a libkineto process's trace is not followed across a restart (a file it writes "
    "stays in the trace's folder)"
)
_RESTARTED_PENDING = "dynod restarted before the process picked the trace up"
RESUMED_TIMEOUT = "dynod restarted mid-trace, and the process did not report its file to the restarted daemon"


@dataclass
class ProcTrace:
    view: ProcessTraceView
    created_ms: int
    delivered_ms: int = 0
    deadline_ms: int = 0  # completion deadline once delivered
    kineto_config: str = ""
    resumed: bool = False  # in flight when dynod restarted, known from its trace's record (see TraceTable._recover)
    heard: bool = False  # resumed, and its agent has reported to this daemon since (its waiting note is fresh)


@dataclass
class TraceEntry:
    trace_id: str
    spec: TraceSpec
    created_ms: int
    procs: dict[int, ProcTrace] = field(default_factory=dict)

    def finished(self) -> bool:
        return all(p.view.state in FINAL_STATES for p in self.procs.values())


class TraceTable:
    """The traces and their processes' states, under one lock; the base of TraceManager."""

    def __init__(
        self,
        registry: ProcessRegistry,
        trace_dir: Path,
        hostname: str,
        *,
        delivery_timeout_s: float = 30.0,
        completion_slack_s: float = 30.0,
        iteration_timeout_s: float = 600.0,
        max_active_traces: int = 32,
        max_kept_traces: int = 1000,
        clock_ms: Callable[[], int] = now_ms,
        on_start: Callable[[], None] = lambda: None,
        kineto_identifier: KinetoIdentifier | None = None,
    ) -> None:
        self._registry = registry
        self._identifier = kineto_identifier or KinetoIdentifier()  # reads /proc/<pid>/{environ,cmdline}
        # the process list's DataLoader-worker checks: pid -> (start time, checked at ms, is a worker)
        self._listed_workers: dict[int, tuple[int, int, bool]] = {}
        self._on_start = on_start  # e.g. wakes the housekeeping thread from its idle pace
        self._trace_dir = trace_dir
        self._hostname = hostname
        self._delivery_timeout_ms = int(delivery_timeout_s * 1000)
        self._slack_ms = int(completion_slack_s * 1000)
        self._iteration_timeout_ms = int(iteration_timeout_s * 1000)
        self._max_active = max_active_traces
        self._max_kept = max_kept_traces
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._traces: OrderedDict[str, TraceEntry] = OrderedDict()
        self._agent_queues: dict[int, tuple[str, queue.Queue[AgentCommand | None]]] = {}
        # trace id -> its view to record, queued under the lock at each process's end, written to disk outside it
        self._unrecorded: dict[str, TraceEntry] = {}  # traces whose record must be written again
        self._recording = threading.Lock()  # held by the thread writing records (in the order they were queued)
        # pids whose traces' leftovers wait for the process to end: its Watch stream ended while it still ran (see
        # TraceManager._on_process_removed); ordered, the oldest first
        self._unswept: dict[int, None] = {}
        registry.add_removal_listener(self._on_process_removed)

    @property
    def trace_dir(self) -> Path:
        return self._trace_dir

    def _completion_deadline(self, spec: TraceSpec, delivered_ms: int) -> int:
        if spec.duration_ms is not None:
            return max(delivered_ms, spec.start_time_ms or 0) + spec.duration_ms + self._slack_ms
        return delivered_ms + self._iteration_timeout_ms

    def _evict_old(self) -> None:
        while len(self._traces) > self._max_kept:
            victim = next((tid for tid, t in self._traces.items() if t.finished()), None)
            if victim is None:
                return
            del self._traces[victim]

    def _active_for(self, pid: int) -> tuple[TraceEntry, ProcTrace] | None:
        for trace in reversed(self._traces.values()):
            pt = trace.procs.get(pid)
            if pt is not None and pt.view.state not in FINAL_STATES:
                return trace, pt
        return None

    def _set(
        self, trace: TraceEntry, pt: ProcTrace, state: TraceState, error: str = "", size: int | None = None
    ) -> None:
        """State change under self._lock; clears the busy flag outside of it via the caller's list."""
        if pt.view.state in FINAL_STATES:
            return
        pt.view = replace(
            pt.view,
            state=state,
            error=error,
            updated_ms=self._clock_ms(),
            size_bytes=pt.view.size_bytes if size is None else size,
            # what it waited for says why a process did not finish; a done one did
            waiting="" if state == TraceState.DONE else pt.view.waiting,
        )
        log.info("trace %s pid %d: %s%s", trace.trace_id, pt.view.pid, state.value, f" ({error})" if error else "")
        if state in FINAL_STATES:
            self._registry.set_busy(pt.view.pid, "")
            self._queue_record(trace)

    def _queue_record(self, trace: TraceEntry) -> None:
        """Under self._lock: (re)write the trace's record, at each process's end, not only the trace's: a process
        that reported done before dynod restarted is known done to the restarted daemon (_recover). Its view is
        taken when the record is written (_write_records), once: taken here, at each of a trace's 1,000 process
        ends, it cost O(processes^2) under the lock (~100 ms for one CancelTrace), which libkineto's polls wait for."""
        self._unrecorded.pop(trace.trace_id, None)
        self._unrecorded[trace.trace_id] = trace

    def _set_waiting(self, trace: TraceEntry, pt: ProcTrace, note: str) -> None:
        """Under self._lock: why a process that has not finished seems stuck (ProcessTraceView.waiting), "" when
        nothing seems wrong. Not a state change: no INFO line (an agent refreshes its note every few seconds)."""
        if pt.view.state in FINAL_STATES or pt.view.waiting == note:
            return
        if bool(note) != bool(pt.view.waiting):  # its "for N s" changes every second: not a line each time
            log.debug("trace %s pid %d: waiting: %s", trace.trace_id, pt.view.pid, note or "(cleared)")
        pt.view = replace(pt.view, waiting=note)

    def _write_records(self) -> None:
        """Records queued since the last call, written outside the lock: disk I/O must not hold up libkineto's polls
        (they wait ~90 ms for a reply; they never write records). One thread writes at a time, what it took from
        the queue, so a newer view of a trace is never overwritten by an older one taken before it."""
        with self._recording:
            with self._lock:
                views = [self._view(trace) for trace in self._unrecorded.values()]
                self._unrecorded = {}
            for view in views:
                tj.write_record(self._trace_dir, view, self._hostname, self._clock_ms())

    def _recover(self, trace_id: str) -> None:
        """An id unknown in memory (the daemon restarted, or evicted it): load its folder's record, if any. Lazily,
        on the first call naming it (a query, or an agent's report), so start-up reads nothing and memory holds at
        most max_kept_traces. A trace that was in flight when dynod restarted is resumed (_resume)."""
        with self._lock:
            if trace_id in self._traces:
                return
        view = tj.load_record(self._trace_dir, trace_id)  # outside the lock: disk I/O
        if view is None:
            return
        with self._lock:
            if trace_id in self._traces:
                return
            trace = TraceEntry(trace_id, view.spec, view.created_ms)
            trace.procs = {v.pid: ProcTrace(v, created_ms=v.updated_ms) for v in view.processes}
            self._traces[trace_id] = trace
            if not view.finished:
                self._resume(trace)
            self._evict_old()
        self._write_records()

    def _resume(self, trace: TraceEntry) -> None:
        """Under self._lock: a trace recorded while some of its processes had reported their end and others had
        not, when dynod restarted. An agent process that had the request goes on recording, and reports its file
        to this daemon once registered again: it is waited for until its completion deadline (from when it was
        last known to have the request). The others cannot report: failed, with why."""
        failed = False
        for pt in trace.procs.values():
            v = pt.view
            if v.state in FINAL_STATES:
                continue
            if v.protocol == PROTOCOL_AGENT and v.state != TraceState.PENDING:
                pt.resumed, pt.delivered_ms = True, v.updated_ms
                pt.deadline_ms = self._completion_deadline(trace.spec, v.updated_ms)
                continue
            # not through _set: the registry's busy flag of the pid is now another trace's, if any
            why = _RESTARTED_KINETO if v.protocol != PROTOCOL_AGENT else _RESTARTED_PENDING
            pt.view = replace(v, state=TraceState.FAILED, error=why, updated_ms=self._clock_ms())
            log.info("trace %s pid %d: failed (%s)", trace.trace_id, v.pid, why)
            failed = True
        if failed:
            self._queue_record(trace)

    @staticmethod
    def _view(trace: TraceEntry) -> TraceView:
        procs = tuple(p.view for p in trace.procs.values())
        return TraceView(trace.trace_id, trace.spec, procs, trace.finished(), trace.created_ms)

    def _unknown(self, trace_id: str) -> UnknownTraceError:
        return UnknownTraceError(
            f"no trace {trace_id!r} on host {self._hostname}{tf.forgotten_trace_hint(self._trace_dir, trace_id)}"
        )

    def _on_process_removed(self, rec: ProcessRecord, reason: str) -> None:
        """What a registered process's removal means for its traces: TraceManager fails them and cleans up."""
        raise NotImplementedError

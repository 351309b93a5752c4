"""The trace manager's state: the traces it knows (each with its processes' states), the lock that guards them, the
state changes every protocol makes and the queue of records to write. One object, shared by the manager
(manager.py) and the protocol sides (agent_side.py, kineto_side.py), which hold a reference to it.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from dyno.daemon.registry import ProcessRegistry, now_ms
from dyno.daemon.tracing import journal as tj
from dyno.daemon.tracing.values import (
    FINAL_STATES,
    ProcessTraceView,
    TraceReason,
    TraceSpec,
    TraceState,
    TraceView,
    UnknownTraceError,
)
from dyno.error_reasons import ErrorReason

__all__ = ["DEFAULT_LIMITS", "ProcTrace", "RESUMED_TIMEOUT", "PartResumer", "TraceEntry", "TraceLimits", "TraceTable"]

log = logging.getLogger(__name__)

RESUMED_TIMEOUT = "dynod restarted mid-trace, and the process did not report its file to the restarted daemon"


@dataclass
class ProcTrace:
    view: ProcessTraceView
    created_ms: int
    delivered_ms: int = 0
    deadline_ms: int = 0  # completion deadline once delivered
    kineto_config: str = ""
    resumed: bool = False  # in flight when dynod restarted, known from its trace's record (see TraceTable.recover)
    heard: bool = False  # resumed, and its agent has reported to this daemon since (its waiting note is fresh)


@dataclass
class TraceEntry:
    trace_id: str
    spec: TraceSpec
    created_ms: int
    procs: dict[int, ProcTrace] = field(default_factory=dict)

    def finished(self) -> bool:
        return all(p.view.state in FINAL_STATES for p in self.procs.values())


# Under the table's lock, for a recovered trace's part that had not ended: "" when it goes on after the restart
# (its side set its deadline), else why it failed (protocol.ProtocolSide.resume).
PartResumer = Callable[[TraceEntry, ProcTrace], str]


@dataclass(frozen=True)
class TraceLimits:
    """How long a trace's processes may take, and how many traces the table holds."""

    delivery_timeout_s: float = 30.0  # a process that has not picked up the request by then fails
    completion_slack_s: float = 30.0  # a duration trace's process fails this long after its window's end
    iteration_timeout_s: float = 600.0  # an iteration trace's process fails this long after delivery
    max_active_traces: int = 32  # unfinished traces; StartTrace past it is refused
    max_kept_traces: int = 1000  # traces kept: past it, the oldest finished ones are forgotten


DEFAULT_LIMITS = TraceLimits()


class TraceTable:
    """The traces and their processes' states, under one lock (`lock`: every method named "under the lock" expects
    the caller to hold it)."""

    def __init__(
        self,
        registry: ProcessRegistry,
        trace_dir: Path,
        hostname: str,
        *,
        resume_part: PartResumer,
        limits: TraceLimits = DEFAULT_LIMITS,
        clock_ms: Callable[[], int] = now_ms,
    ) -> None:
        self.registry = registry
        self.trace_dir = trace_dir
        self.hostname = hostname
        self.clock_ms = clock_ms
        self.delivery_timeout_ms = int(limits.delivery_timeout_s * 1000)
        self.max_active = limits.max_active_traces
        self._resume_part = resume_part
        self._slack_ms = int(limits.completion_slack_s * 1000)
        self._iteration_timeout_ms = int(limits.iteration_timeout_s * 1000)
        self._max_kept = limits.max_kept_traces
        self.lock = threading.Lock()
        self.traces: OrderedDict[str, TraceEntry] = OrderedDict()
        # trace id -> its entry, queued under the lock at each process's end, its record written to disk outside it
        self._unrecorded: dict[str, TraceEntry] = {}
        self._recording = threading.Lock()  # held by the thread writing records (in the order they were queued)

    def completion_deadline(self, spec: TraceSpec, delivered_ms: int) -> int:
        if spec.duration_ms is not None:
            return max(delivered_ms, spec.start_time_ms or 0) + spec.duration_ms + self._slack_ms
        return delivered_ms + self._iteration_timeout_ms

    def evict_old(self) -> None:
        while len(self.traces) > self._max_kept:
            victim = next((tid for tid, t in self.traces.items() if t.finished()), None)
            if victim is None:
                return
            del self.traces[victim]

    def active_for(self, pid: int) -> tuple[TraceEntry, ProcTrace] | None:
        for trace in reversed(self.traces.values()):
            pt = trace.procs.get(pid)
            if pt is not None and pt.view.state not in FINAL_STATES:
                return trace, pt
        return None

    def set(
        self,
        trace: TraceEntry,
        pt: ProcTrace,
        state: TraceState,
        error: str = "",
        size: int | None = None,
        reason: TraceReason = TraceReason.NONE,
    ) -> None:
        """Under the lock: a state change; a final one clears the pid's busy flag and queues the trace's record."""
        if pt.view.state in FINAL_STATES:
            return
        now = self.clock_ms()
        pt.view = replace(
            pt.view,
            state=state,
            error=error,
            updated_ms=now,
            running_ms=now if state == TraceState.RUNNING and not pt.view.running_ms else pt.view.running_ms,
            size_bytes=pt.view.size_bytes if size is None else size,
            reason=reason,
            # what it waited for says why a process did not finish; a done one did
            waiting="" if state == TraceState.DONE else pt.view.waiting,
        )
        log.info("trace %s pid %d: %s%s", trace.trace_id, pt.view.pid, state.value, f" ({error})" if error else "")
        if state in FINAL_STATES:
            self.registry.set_busy(pt.view.pid, "")
            self.queue_record(trace)

    def queue_record(self, trace: TraceEntry) -> None:
        """Under the lock: (re)write the trace's record, at each process's end, not only the trace's: a process
        that reported done before dynod restarted is known done to the restarted daemon (recover). Its view is
        taken when the record is written (write_records), once: taken here, at each of a trace's 1,000 process
        ends, it cost O(processes^2) under the lock, which libkineto's polls wait for."""
        self._unrecorded.pop(trace.trace_id, None)
        self._unrecorded[trace.trace_id] = trace

    def set_waiting(self, trace: TraceEntry, pt: ProcTrace, note: str) -> None:
        """Under the lock: why a process that has not finished seems stuck (ProcessTraceView.waiting), "" when
        nothing seems wrong. Not a state change: no INFO line (an agent refreshes its note every few seconds)."""
        if pt.view.state in FINAL_STATES or pt.view.waiting == note:
            return
        if bool(note) != bool(pt.view.waiting):  # its "for N s" changes every second: not a line each time
            log.debug("trace %s pid %d: waiting: %s", trace.trace_id, pt.view.pid, note or "(cleared)")
        pt.view = replace(pt.view, waiting=note)

    def write_records(self) -> None:
        """Records queued since the last call, written outside the lock: disk I/O must not hold up libkineto's polls
        (they wait ~90 ms for a reply; they never write records). One thread writes at a time, what it took from
        the queue, so a newer view of a trace is never overwritten by an older one taken before it."""
        with self._recording:
            with self.lock:
                views = [self.view(trace) for trace in self._unrecorded.values()]
                self._unrecorded = {}
            for view in views:
                tj.write_record(self.trace_dir, view, self.hostname, self.clock_ms())
                if view.finished and self.finished_listener is not None:
                    try:
                        self.finished_listener(view)
                    except Exception:  # a listener's bug must not stop the records of other traces
                        log.exception("trace %s: the finished-trace listener failed", view.trace_id)

    # told each finished trace's view once its record is written (again at each rewrite: a late report's change),
    # outside the lock (dyno.daemon.analysis queues it); set once before start
    finished_listener: Callable[[TraceView], None] | None = None

    def recover(self, trace_id: str) -> None:
        """An id unknown in memory (the daemon restarted, or evicted it): load its folder's record, if any. Lazily,
        on the first call naming it (a query, or an agent's report), so start-up reads nothing and memory holds at
        most max_kept_traces. A trace that was in flight when dynod restarted is resumed (_resume)."""
        with self.lock:
            if trace_id in self.traces:
                return
        view = tj.load_record(self.trace_dir, trace_id)  # outside the lock: disk I/O
        if view is None:
            return
        with self.lock:
            if trace_id in self.traces:
                return
            trace = TraceEntry(trace_id, view.spec, view.created_ms)
            trace.procs = {v.pid: ProcTrace(v, created_ms=v.updated_ms) for v in view.processes}
            self.traces[trace_id] = trace
            if not view.finished:
                self._resume(trace)
            self.evict_old()
        self.write_records()

    def _resume(self, trace: TraceEntry) -> None:
        """Under the lock: a trace recorded while some of its processes had reported their end and others had not,
        when dynod restarted. Each part that had not ended goes on or fails, as its protocol's side says."""
        failed = False
        for pt in trace.procs.values():
            v = pt.view
            if v.state in FINAL_STATES:
                continue
            why = self._resume_part(trace, pt)
            if not why:
                continue
            # not through set(): the registry's busy flag of the pid is now another trace's, if any
            pt.view = replace(
                v, state=TraceState.FAILED, error=why, updated_ms=self.clock_ms(), reason=TraceReason.DAEMON_RESTARTED
            )
            log.info("trace %s pid %d: failed (%s)", trace.trace_id, v.pid, why)
            failed = True
        if failed:
            self.queue_record(trace)

    @staticmethod
    def view(trace: TraceEntry) -> TraceView:
        procs = tuple(p.view for p in trace.procs.values())
        return TraceView(trace.trace_id, trace.spec, procs, trace.finished(), trace.created_ms)

    def unknown(self, trace_id: str) -> UnknownTraceError:
        hint = tj.forgotten_trace_hint(self.trace_dir, trace_id)
        reason = ErrorReason.TRACE_FORGOTTEN if hint else ErrorReason.TRACE_NOT_FOUND
        return UnknownTraceError(f"no trace {trace_id!r} on host {self.hostname}{hint}", reason)

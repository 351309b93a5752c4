"""Trace lifecycle: match a request to registered processes, hand configs over, track per-process state.

Per process: pending -> delivered -> running -> done | failed | timed_out | cancelled, always with a reason when
it did not end in done. Plain Python (no gRPC): the agent service, the kineto endpoint and the Dyno RPCs call in.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path

from dyno.daemon import trace_files as tf
from dyno.daemon import trace_journal as tj
from dyno.daemon.kineto_identity import KinetoIdentifier, KinetoIdentity
from dyno.daemon.kineto_ipc import ConfigValueError, KinetoPoll, trace_config
from dyno.daemon.kineto_window import iteration_fallback_note
from dyno.daemon.registry import (
    PROTOCOL_AGENT,
    PROTOCOL_KINETO,
    ProcessRecord,
    ProcessRegistry,
    RegistryFullError,
    now_ms,
)
from dyno.daemon.trace_leftovers import leftover_paths, remove_leftovers
from dyno.daemon.trace_requests import validate_spec, why_nothing
from dyno.daemon.trace_types import (
    FINAL_STATES,
    AgentCancelCommand,
    AgentCommand,
    AgentTraceCommand,
    ProcessTraceView,
    StartResult,
    TraceLimitError,
    TraceRequestError,
    TraceSpec,
    TraceState,
    TraceView,
    UnknownTraceError,
)
from dyno.logthrottle import ThrottledLog
from dyno.trace_ids import validate_trace_id

# The values it takes and returns live in dyno.daemon.trace_types; import them from there.
__all__ = ["TraceManager", "order_for_limit"]

log = logging.getLogger(__name__)


@dataclass
class _ProcTrace:
    view: ProcessTraceView
    created_ms: int
    delivered_ms: int = 0
    deadline_ms: int = 0  # completion deadline once delivered
    kineto_config: str = ""


@dataclass
class _Trace:
    trace_id: str
    spec: TraceSpec
    created_ms: int
    procs: dict[int, _ProcTrace] = field(default_factory=dict)

    def finished(self) -> bool:
        return all(p.view.state in FINAL_STATES for p in self.procs.values())


def order_for_limit(procs: list[ProcessRecord], helpers: Collection[int] = ()) -> list[ProcessRecord]:
    """Leaf trainers first: a process whose pid is in another matched trainer's ancestry is a launcher; `helpers`
    (pids of DataLoader workers: children of a trainer, never trainers themselves) come last and make no launcher
    of their parent."""
    ancestors = {a for p in procs if p.pid not in helpers for a in p.ancestry}
    return sorted(
        procs,
        key=lambda p: (p.pid in helpers, p.pid in ancestors, p.rank if p.rank is not None else 1 << 30, p.pid),
    )


class TraceManager:
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
        self._traces: OrderedDict[str, _Trace] = OrderedDict()
        self._agent_queues: dict[int, tuple[str, queue.Queue[AgentCommand | None]]] = {}
        self._unrecorded: list[TraceView] = []  # finished under the lock, written to disk outside it
        self._full_log = ThrottledLog(log, every_s=600.0)  # a full registry refuses every poll of every new pid
        registry.add_removal_listener(self._on_process_removed)

    @property
    def trace_dir(self) -> Path:
        return self._trace_dir

    # -- requests ---------------------------------------------------------------------------------------------

    def validate(self, spec: TraceSpec) -> TraceSpec:
        """Raises TraceRequestError naming the field; returns the spec with a trace id."""
        return validate_spec(spec, self._clock_ms())

    def start(self, spec: TraceSpec) -> StartResult:
        spec = self.validate(spec)
        trace_id = spec.trace_id
        procs = self._registry.list(spec.job_id)
        wanted = set(spec.pids)
        matched = [p for p in procs if not wanted or wanted & ({p.pid} | set(p.ancestry))]
        jobs = tuple(self._registry.jobs())
        if not matched:
            return StartResult(
                trace_id, (), (), (), why_nothing(spec, [p.pid for p in procs], jobs, self._hostname), jobs
            )
        chosen = order_for_limit(matched, self._data_workers(matched) if spec.process_limit else ())
        if spec.process_limit:
            chosen = chosen[: spec.process_limit]
        now = self._clock_ms()
        with self._lock:
            # On disk too: a trace from before a restart, or evicted from memory, keeps its folder and files
            if trace_id in self._traces or (self._trace_dir / trace_id).exists():
                raise TraceRequestError("trace_id", f"{trace_id!r} is already in use on this host")
            if sum(not t.finished() for t in self._traces.values()) >= self._max_active:
                raise TraceLimitError(f"{self._max_active} traces are already active on this host")
            busy = [p for p in chosen if self._active_for(p.pid) is not None]
            todo = [p for p in chosen if p not in busy]
            if not todo:
                return StartResult(
                    trace_id,
                    tuple(p.pid for p in matched),
                    (),
                    tuple(p.pid for p in busy),
                    "every matched process is already tracing",
                    jobs,
                )
            tf.make_trace_dir(self._trace_dir, trace_id)
            trace = _Trace(trace_id, spec, now)
            for p in todo:
                trace.procs[p.pid] = self._new_proc_trace(trace, p, now)
            self._traces[trace_id] = trace
            self._evict_old()
            for p in todo:
                if p.protocol == PROTOCOL_AGENT:
                    self._send_agent(p.pid, self._agent_command(trace, trace.procs[p.pid]))
            triggered = tuple(pt.view for pt in trace.procs.values())
        for p in todo:
            self._registry.set_busy(p.pid, trace_id)
        msg = f"triggered {len(todo)} of {len(matched)} matched process(es)"
        if busy:
            msg += f"; {len(busy)} busy with another trace"
        log.info("trace %s (job %r): %s", trace_id, spec.job_id, msg)
        self._on_start()
        return StartResult(trace_id, tuple(p.pid for p in matched), triggered, tuple(p.pid for p in busy), msg, jobs)

    def _data_workers(self, procs: list[ProcessRecord]) -> set[int]:
        """Pids of DataLoader workers among kineto processes (the agent never registers one); /proc reads, made
        before taking self._lock."""
        return {p.pid for p in procs if p.protocol == PROTOCOL_KINETO and self._identifier.is_data_worker(p.pid)}

    def _new_proc_trace(self, trace: _Trace, p: ProcessRecord, now: int) -> _ProcTrace:
        spec = trace.spec
        if p.protocol == PROTOCOL_KINETO:
            path = tf.kineto_output(self._trace_dir, trace.trace_id, self._hostname, p.pid)
            try:
                config = trace_config(
                    trace_id=trace.trace_id,
                    log_file=tf.kineto_log_file(self._trace_dir, trace.trace_id, self._hostname),
                    duration_ms=spec.duration_ms,
                    iterations=spec.iterations,
                    start_time_ms=spec.start_time_ms,
                    start_iteration_roundup=spec.start_iteration_roundup,
                    record_shapes=spec.record_shapes,
                    profile_memory=spec.profile_memory,
                    with_stack=spec.with_stack,
                    with_flops=spec.with_flops,
                    with_modules=spec.with_modules,
                )
            except ConfigValueError as e:  # e.g. a trace dir path containing '=': never send a broken line
                raise TraceRequestError("trace_id", f"cannot express this trace for libkineto: {e}") from None
        else:
            path = tf.agent_output(self._trace_dir, trace.trace_id, self._hostname, p.pid)
            config = ""
        view = ProcessTraceView(p.pid, p.job_id, p.rank, p.protocol, TraceState.PENDING, str(path), updated_ms=now)
        return _ProcTrace(view, created_ms=now, kineto_config=config)

    def _completion_deadline(self, spec: TraceSpec, delivered_ms: int) -> int:
        if spec.duration_ms is not None:
            return max(delivered_ms, spec.start_time_ms or 0) + spec.duration_ms + self._slack_ms
        return delivered_ms + self._iteration_timeout_ms

    def _agent_command(self, trace: _Trace, pt: _ProcTrace) -> AgentTraceCommand:
        deadline = self._completion_deadline(trace.spec, pt.created_ms + self._delivery_timeout_ms)
        return AgentTraceCommand(trace.trace_id, trace.spec, Path(pt.view.path), deadline)

    def _evict_old(self) -> None:
        while len(self._traces) > self._max_kept:
            victim = next((tid for tid, t in self._traces.items() if t.finished()), None)
            if victim is None:
                return
            del self._traces[victim]

    def _active_for(self, pid: int) -> tuple[_Trace, _ProcTrace] | None:
        for trace in reversed(self._traces.values()):
            pt = trace.procs.get(pid)
            if pt is not None and pt.view.state not in FINAL_STATES:
                return trace, pt
        return None

    def _set(self, trace: _Trace, pt: _ProcTrace, state: TraceState, error: str = "", size: int | None = None) -> None:
        """State change under self._lock; clears the busy flag outside of it via the caller's list."""
        if pt.view.state in FINAL_STATES:
            return
        pt.view = replace(
            pt.view,
            state=state,
            error=error,
            updated_ms=self._clock_ms(),
            size_bytes=pt.view.size_bytes if size is None else size,
        )
        log.info("trace %s pid %d: %s%s", trace.trace_id, pt.view.pid, state.value, f" ({error})" if error else "")
        if state in FINAL_STATES:
            self._registry.set_busy(pt.view.pid, "")
            if trace.finished():
                self._unrecorded.append(self._view(trace))

    def _write_records(self) -> None:
        """Records of the traces finished since the last call, written outside the lock: disk I/O must not hold up
        libkineto's polls (they wait ~90 ms for a reply)."""
        with self._lock:
            views, self._unrecorded = self._unrecorded, []
        for view in views:
            tj.write_record(self._trace_dir, view, self._hostname, self._clock_ms())

    # -- queries ----------------------------------------------------------------------------------------------

    def get(self, trace_id: str) -> TraceView:
        self._recover(trace_id)
        with self._lock:
            trace = self._traces.get(trace_id)
            if trace is None:
                raise self._unknown(trace_id)
            return self._view(trace)

    @staticmethod
    def _view(trace: _Trace) -> TraceView:
        procs = tuple(p.view for p in trace.procs.values())
        return TraceView(trace.trace_id, trace.spec, procs, trace.finished(), trace.created_ms)

    def _recover(self, trace_id: str) -> None:
        """An id unknown in memory (the daemon restarted, or evicted it): load its folder's record, if any. Lazily,
        on the first call naming it, so start-up reads nothing and memory holds at most max_kept_traces."""
        with self._lock:
            if trace_id in self._traces:
                return
        view = tj.load_record(self._trace_dir, trace_id)  # outside the lock: disk I/O
        if view is None:
            return
        with self._lock:
            if trace_id not in self._traces:
                trace = _Trace(trace_id, view.spec, view.created_ms)
                trace.procs = {v.pid: _ProcTrace(v, created_ms=v.updated_ms) for v in view.processes}
                self._traces[trace_id] = trace
                self._evict_old()

    def forget(self, trace_ids: Collection[str]) -> None:
        """Retention deleted these folders: drop their finished traces from memory too (NOT_FOUND from now on)."""
        with self._lock:
            for tid in trace_ids:
                trace = self._traces.get(tid)
                if trace is not None and trace.finished():
                    del self._traces[tid]

    def _unknown(self, trace_id: str) -> UnknownTraceError:
        return UnknownTraceError(
            f"no trace {trace_id!r} on host {self._hostname}{tf.forgotten_trace_hint(self._trace_dir, trace_id)}"
        )

    def active_traces(self) -> int:
        with self._lock:
            return sum(not t.finished() for t in self._traces.values())

    def active_trace_ids(self) -> set[str]:
        with self._lock:
            return {tid for tid, t in self._traces.items() if not t.finished()}

    def cancel(self, trace_id: str) -> TraceView:
        self._recover(trace_id)
        with self._lock:
            trace = self._traces.get(trace_id)
            if trace is None:
                raise self._unknown(trace_id)
            for pt in trace.procs.values():
                if pt.view.state in FINAL_STATES:
                    continue
                if pt.view.protocol == PROTOCOL_AGENT:
                    self._send_agent(pt.view.pid, AgentCancelCommand(trace_id))
                    note = "cancelled by request"
                else:
                    note = (
                        "cancelled by request"
                        if pt.view.state == TraceState.PENDING
                        else "cancelled by request (libkineto may still write its file; it is ignored)"
                    )
                self._set(trace, pt, TraceState.CANCELLED, note)
        self._write_records()
        return self.get(trace_id)

    def trace_file(self, trace_id: str, pid: int) -> Path:
        """The completed file of one process; UnknownTraceError if there is none (yet)."""
        try:
            validate_trace_id(trace_id)
        except ValueError as e:
            raise TraceRequestError("trace_id", str(e)) from None
        self._recover(trace_id)
        with self._lock:
            trace = self._traces.get(trace_id)
            pt = trace.procs.get(pid) if trace is not None else None
            if trace is not None and pt is None:
                raise UnknownTraceError(f"pid {pid} is not part of trace {trace_id!r}")
            if pt is not None and pt.view.state != TraceState.DONE:
                raise UnknownTraceError(
                    f"trace {trace_id!r} pid {pid} has no file: {pt.view.state.value}"
                    + (f" ({pt.view.error})" if pt.view.error else "")
                )
        # The path it was done at (a recovered trace's may name another host name), else whatever is on disk
        path = tf.find_trace_file(self._trace_dir, trace_id, self._hostname, pid, Path(pt.view.path) if pt else None)
        if path is None:
            raise UnknownTraceError(f"no file for trace {trace_id!r} pid {pid} on host {self._hostname}")
        return path

    # -- libkineto --------------------------------------------------------------------------------------------

    def kineto_poll(self, poll: KinetoPoll) -> str | None:
        ident = self._kineto_identity(poll)  # /proc reads, if any, before taking self._lock
        try:
            self._registry.register(
                ProcessRecord(
                    pid=poll.pid,
                    job_id=ident.job_id,
                    job_aliases=ident.aliases,
                    protocol=PROTOCOL_KINETO,
                    ancestry=poll.ancestry,
                    uid=poll.uid,
                    cmdline=ident.cmdline,
                    hostname=self._hostname,
                    start_time=ident.start_time,
                )
            )
        except RegistryFullError as e:  # libkineto cannot be told why: it polls again in 5 s
            self._full_log.warning("full", "kineto poll not registered: %s", e)
            return None
        now = self._clock_ms()
        with self._lock:
            found = self._active_for(poll.pid)
            if found is None:
                return None
            trace, pt = found
            if pt.view.protocol != PROTOCOL_KINETO:
                return None
            if pt.view.state == TraceState.PENDING and poll.wants_activities:
                pt.delivered_ms = now
                pt.deadline_ms = self._completion_deadline(trace.spec, now)
                self._set(trace, pt, TraceState.DELIVERED)
                return pt.kineto_config
            if pt.view.state == TraceState.DELIVERED and not poll.wants_activities:
                # libkineto stops asking for activity configs while one is pending or running.
                self._set(trace, pt, TraceState.RUNNING)
        return None

    def _kineto_identity(self, poll: KinetoPoll) -> KinetoIdentity:
        """Cached with the registration: the environment and command line are read on a pid's first poll only. The
        cache is keyed on the process, not the pid: its start time (/proc/<pid>/stat, read on every poll) differs
        for a later process reusing the pid, even one of the same uid and kineto job id polling before housekeeping
        (~0.5 s) dropped the old one; that one is read again. Another uid or kineto job id is another process too."""
        known = self._registry.get(poll.pid)
        if known is not None and known.protocol == PROTOCOL_AGENT and known.connected:
            return KinetoIdentity(known.job_id, known.job_aliases, known.cmdline)  # the registry keeps the agent
        if known is not None and known.protocol == PROTOCOL_KINETO:
            start_time = self._identifier.start_time(poll.pid)
            if known.same_process(start_time) and known.uid == poll.uid and known.answers_to(poll.job_id):
                return KinetoIdentity(known.job_id, known.job_aliases, known.cmdline, start_time or known.start_time)
        return self._identifier.identify(poll.pid, poll.job_id)

    def kineto_context_count(self, gpu: int, pid: int, job_id: str) -> int:
        known = self._registry.get(pid)
        if known is not None and known.answers_to(job_id):
            job_id = known.job_id
        else:  # not registered yet: the id its first poll will register under
            job_id = self._identifier.job_id(pid) or job_id
        return sum(1 for p in self._registry.list(job_id) if p.protocol == PROTOCOL_KINETO and p.gpu == gpu) or 1

    # -- agent ------------------------------------------------------------------------------------------------

    def agent_attach(self, pid: int, session_id: str) -> queue.Queue[AgentCommand | None]:
        """A Watch stream opened: its queue, preloaded with this pid's undelivered trace, if any."""
        q: queue.Queue[AgentCommand | None] = queue.Queue()
        with self._lock:
            self._agent_queues[pid] = (session_id, q)
            found = self._active_for(pid)
            if found is not None and found[1].view.state == TraceState.PENDING:
                q.put(self._agent_command(*found))
        return q

    def agent_detach(self, pid: int, session_id: str) -> None:
        with self._lock:
            cur = self._agent_queues.get(pid)
            if cur is not None and cur[0] == session_id:
                del self._agent_queues[pid]

    def _send_agent(self, pid: int, command: AgentCommand) -> None:
        entry = self._agent_queues.get(pid)
        if entry is not None:
            entry[1].put(command)

    def agent_delivered(self, pid: int, trace_id: str) -> None:
        with self._lock:
            trace = self._traces.get(trace_id)
            pt = trace.procs.get(pid) if trace else None
            if trace is None or pt is None or pt.view.state != TraceState.PENDING:
                return
            now = self._clock_ms()
            pt.delivered_ms = now
            pt.deadline_ms = self._completion_deadline(trace.spec, now)
            self._set(trace, pt, TraceState.DELIVERED)

    def agent_report(self, pid: int, trace_id: str, state: TraceState, error: str = "") -> None:
        """RUNNING, DONE or FAILED from the agent; DONE is believed only when the assigned file is there. `error`:
        FAILED's reason, or an optional note with DONE (kept in the process's error field)."""
        with self._lock:
            trace = self._traces.get(trace_id)
            pt = trace.procs.get(pid) if trace else None
            if trace is None or pt is None:
                raise UnknownTraceError(f"no trace {trace_id!r} for pid {pid}")
            if state == TraceState.RUNNING:
                if pt.view.state in (TraceState.PENDING, TraceState.DELIVERED):
                    self._set(trace, pt, TraceState.RUNNING)
            elif state == TraceState.DONE:
                try:
                    size = Path(pt.view.path).stat().st_size
                except OSError:
                    self._set(trace, pt, TraceState.FAILED, f"agent reported done but {pt.view.path} is missing")
                else:
                    # A done trace's text is a note, not a failure (e.g. it ended early: the program exited).
                    self._set(trace, pt, TraceState.DONE, error, size=size)
            elif state == TraceState.FAILED:
                self._set(trace, pt, TraceState.FAILED, error or "agent reported failure without a reason")
            else:
                raise TraceRequestError("state", f"an agent reports running, done or failed, not {state.value}")
        self._write_records()

    # -- housekeeping -----------------------------------------------------------------------------------------

    def housekeeping(self) -> None:
        """Completion of kineto files, timeouts, then registry garbage collection. Call every ~0.5 s."""
        self._check_files_and_timeouts()
        self._registry.collect_garbage()
        self._write_records()

    def _check_files_and_timeouts(self) -> None:
        notes = self._kineto_notes()
        now = self._clock_ms()
        with self._lock:
            for trace in self._traces.values():
                if trace.finished():
                    continue
                for pt in trace.procs.values():
                    state = pt.view.state
                    if state in FINAL_STATES:
                        continue
                    if pt.view.protocol == PROTOCOL_KINETO and state != TraceState.PENDING:
                        if self._kineto_file_check(trace, pt, notes):
                            continue
                    if state == TraceState.PENDING and now - pt.created_ms > self._delivery_timeout_ms:
                        how = (
                            "libkineto polls every ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS, default 5 s"
                            if pt.view.protocol == PROTOCOL_KINETO
                            else "no Watch stream from the agent"
                        )
                        self._set(
                            trace,
                            pt,
                            TraceState.TIMED_OUT,
                            f"not picked up within {self._delivery_timeout_ms / 1000:.0f} s ({how})",
                        )
                    elif state != TraceState.PENDING and pt.deadline_ms and now > pt.deadline_ms:
                        hint = (
                            " (iteration trace: does the program call optimizer.step()?)"
                            if trace.spec.iterations is not None
                            else ""
                        )
                        if pt.view.protocol == PROTOCOL_KINETO:
                            hint = tf.discard_unfinished_kineto_file(Path(pt.view.path)) or hint
                        self._set(trace, pt, TraceState.TIMED_OUT, f"no complete trace file by the deadline{hint}")

    def _kineto_notes(self, pid: int | None = None) -> dict[tuple[str, int], str]:
        """The done notes of kineto iteration traces (of `pid`, or all) whose file is complete, keyed by (trace id,
        pid): read from the files outside self._lock (a file may be large), so they are there when the trace turns
        done. "" when libkineto recorded the iterations; a note when it fell back to its 500 ms window."""
        with self._lock:
            todo = [
                (t.trace_id, pt.view.pid, Path(pt.view.path), t.spec.iterations)
                for t in self._traces.values()
                if t.spec.iterations is not None and not t.finished()
                for pt in t.procs.values()
                if pt.view.protocol == PROTOCOL_KINETO
                and pt.view.state in (TraceState.DELIVERED, TraceState.RUNNING)
                and pid in (None, pt.view.pid)
            ]
        return {(tid, p): iteration_fallback_note(path, n) for tid, p, path, n in todo if path.exists()}

    def _kineto_file_check(self, trace: _Trace, pt: _ProcTrace, notes: dict[tuple[str, int], str]) -> bool:
        """Under self._lock: True when the kineto file is complete (state set to done, with its note from `notes`;
        an iteration trace's file not looked at yet waits for the next round)."""
        path = Path(pt.view.path)
        key = (trace.trace_id, pt.view.pid)
        try:
            size = path.stat().st_size
        except OSError:
            if pt.view.state == TraceState.DELIVERED and Path(str(path) + ".tmp").exists():
                self._set(trace, pt, TraceState.RUNNING)
            return False
        if trace.spec.iterations is not None and key not in notes:
            return False
        self._set(trace, pt, TraceState.DONE, notes.get(key, ""), size=size)
        return True

    def _on_process_removed(self, rec: ProcessRecord, reason: str) -> None:
        notes = self._kineto_notes(rec.pid) if rec.protocol == PROTOCOL_KINETO else {}
        with self._lock:
            found = self._active_for(rec.pid)
            if found is not None:
                trace, pt = found
                # a kineto process may have finished its file and exited right after
                kineto_started = pt.view.protocol == PROTOCOL_KINETO and pt.view.state != TraceState.PENDING
                if not (kineto_started and self._kineto_file_check(trace, pt, notes)):
                    when = "before picking up the trace" if pt.view.state == TraceState.PENDING else "mid-trace"
                    self._set(trace, pt, TraceState.FAILED, f"{reason} {when}")
            leftovers = self._leftovers(rec.pid)
        remove_leftovers(leftovers)  # outside the lock: disk I/O
        self._write_records()

    def _leftovers(self, pid: int) -> list[Path]:
        """Under self._lock, once a process is gone: what its traces that did not end done may have left."""
        return [p for t in self._traces.values() if pid in t.procs for p in leftover_paths(t.procs[pid].view)]

"""Trace lifecycle: match a request to registered processes, hand configs over, track per-process state.

Per process: pending -> delivered -> running -> done | failed | timed_out | cancelled, always with a reason when
it did not end in done. Plain Python (no gRPC): the agent service, the kineto endpoint and the Dyno RPCs call in.
Its parts, composed: table.TraceTable (the traces and their state changes, under one lock), one protocol.ProtocolSide
per protocol (kineto_side.KinetoSide: libkineto's polls and files; agent_side.AgentSide: the agents' streams and
reports), picked by a process's protocol; this module adds requests, queries and housekeeping.
"""

from __future__ import annotations

import contextlib
import logging
import queue
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from dyno.daemon.process_roles import job_roles, order_for_limit
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry, now_ms
from dyno.daemon.tracing import trust
from dyno.daemon.tracing.agent_side import AgentSide
from dyno.daemon.tracing.kineto_identity import KinetoIdentifier
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.kineto_side import KinetoSide
from dyno.daemon.tracing.leftovers import leftover_paths, remove_leftovers
from dyno.daemon.tracing.listed_workers import LISTED_WORKERS_MAX_AGE_MS
from dyno.daemon.tracing.preemption import preempt_periodic
from dyno.daemon.tracing.protocol import ProtocolSide
from dyno.daemon.tracing.requests import only_launchers, others_only, validate_spec, why_nothing
from dyno.daemon.tracing.table import DEFAULT_LIMITS, ProcTrace, TraceEntry, TraceLimits, TraceTable
from dyno.daemon.tracing.values import (
    FINAL_STATES,
    AgentCommand,
    ProcessTraceView,
    StartResult,
    TraceLimitError,
    TraceReason,
    TraceRequestError,
    TraceSpec,
    TraceState,
    TraceView,
    UnknownTraceError,
)
from dyno.error_reasons import ErrorReason
from dyno.trace_ids import validate_trace_id

# The values it takes and returns live in dyno.daemon.tracing.values; import them from there.
__all__ = ["LISTED_WORKERS_MAX_AGE_MS", "TraceManager", "order_for_limit"]

log = logging.getLogger(__name__)

_MAX_UNSWEPT = 4096  # processes whose leftovers wait for them to end (see TraceManager._on_process_removed)


class TraceManager:
    """The trace lifecycle's one entry point: requests, queries, housekeeping, and the calls of the agent service and
    the kineto endpoint, which it hands to their protocol's side."""

    def __init__(
        self,
        registry: ProcessRegistry,
        trace_dir: Path,
        hostname: str,
        *,
        limits: TraceLimits = DEFAULT_LIMITS,
        clock_ms: Callable[[], int] = now_ms,
        on_start: Callable[[], None] = lambda: None,
        kineto_identifier: KinetoIdentifier | None = None,
    ) -> None:
        self._registry = registry
        self._trace_dir = trace_dir
        self._hostname = hostname
        self._clock_ms = clock_ms
        self._on_start = on_start  # e.g. wakes the housekeeping thread from its idle pace
        self.table = TraceTable(
            registry,
            trace_dir,
            hostname,
            resume_part=lambda trace, pt: self._side(pt.view.protocol).resume(trace, pt),
            limits=limits,
            clock_ms=clock_ms,
        )
        self.agents = AgentSide(self.table)
        self.kineto = KinetoSide(self.table, kineto_identifier or KinetoIdentifier())
        self._sides: tuple[ProtocolSide, ...] = (self.agents, self.kineto)
        # pids whose traces' leftovers wait for the process to end: its registration ended while it still ran (see
        # _on_process_removed); ordered, the oldest first
        self._unswept: dict[int, None] = {}
        registry.add_removal_listener(self._on_process_removed)

    @property
    def trace_dir(self) -> Path:
        return self._trace_dir

    def _side(self, protocol: str) -> ProtocolSide:
        """The side of a process's protocol: the agent's, else libkineto's (a recovered record's unknown protocol)."""
        return self.agents if protocol == PROTOCOL_AGENT else self.kineto

    # -- the agent service's and the kineto endpoint's calls ----------------------------------------------------

    def agent_attach(
        self, pid: int, session_id: str, q: queue.Queue[AgentCommand | None] | None = None
    ) -> queue.Queue[AgentCommand | None]:
        return self.agents.agent_attach(pid, session_id, q)

    def agent_detach(self, pid: int, session_id: str) -> None:
        self.agents.agent_detach(pid, session_id)

    def agent_delivered(self, pid: int, trace_id: str) -> None:
        self.agents.agent_delivered(pid, trace_id)

    def agent_report(self, pid: int, trace_id: str, state: TraceState, error: str = "", *, path: str = "") -> None:
        self.agents.agent_report(pid, trace_id, state, error, path=path)

    def kineto_poll(self, poll: KinetoPoll) -> str | None:
        return self.kineto.kineto_poll(poll)

    def kineto_context_count(self, gpu: int, pid: int, job_id: str) -> int:
        return self.kineto.kineto_context_count(gpu, pid, job_id)

    # told the pids of each trace started (job accounting counts traces per job); set once before start
    trace_listener: Callable[[tuple[int, ...]], None] | None = None

    # -- requests ---------------------------------------------------------------------------------------------

    def validate(self, spec: TraceSpec) -> TraceSpec:
        """Raises TraceRequestError naming the field; returns the spec with a trace id."""
        return validate_spec(spec, self._clock_ms())

    def start(self, spec: TraceSpec, only_uid: int | None = None) -> StartResult:
        """`only_uid`: trace only processes running as this user (a local caller who is no admin: dyno.daemon.callers);
        None: any process."""
        spec = self.validate(spec)
        trace_id = spec.trace_id
        procs = self._registry.list(spec.job_id)
        wanted = set(spec.pids)
        selected = [p for p in procs if not wanted or wanted & ({p.pid} | set(p.ancestry))]
        if only_uid is not None:
            others = [p for p in selected if p.uid != only_uid]
            selected = [p for p in selected if p.uid == only_uid]
            if others and not selected:
                why = others_only(spec, others, only_uid, self._hostname)
                return StartResult(trace_id, (), (), (), why, tuple(self._registry.jobs()))
        # torch's launcher is never traced, even by its own pid: it only waits for its workers (an iteration trace
        # of it is libkineto's 500 ms fallback window), and `--pids <torchrun's pid>` means its workers, which match
        # by ancestry, as on the agent path, where the launcher never registers.
        matched = [p for p in selected if not p.launcher]
        jobs = tuple(self._registry.jobs())
        if not matched:
            why = only_launchers(spec, selected, self._hostname) or why_nothing(
                spec, [p.pid for p in procs], jobs, self._hostname
            )
            return StartResult(trace_id, (), (), (), why, jobs)
        chosen = order_for_limit(matched, self._data_workers(matched, fresh=True) if spec.process_limit else ())
        if spec.process_limit:
            chosen = chosen[: spec.process_limit]
        now = self._clock_ms()
        # Each process's part (paths, libkineto's config line) before taking the lock: ~50 ms for 1,000 processes,
        # which libkineto's polls (they wait ~90 ms for a reply) would otherwise wait for.
        trace = TraceEntry(trace_id, spec, now)
        parts = {p.pid: self._new_proc_trace(trace, p, now) for p in chosen}
        t = self.table
        with t.lock:
            # On disk too: a trace from before a restart, or evicted from memory, keeps its folder and files
            if trace_id in t.traces or (self._trace_dir / trace_id).exists():
                raise TraceRequestError(
                    "trace_id", f"{trace_id!r} is already in use on this host", ErrorReason.TRACE_ID_IN_USE
                )
            if sum(not e.finished() for e in t.traces.values()) >= t.max_active:
                raise TraceLimitError(f"{t.max_active} traces are already active on this host")
            active = {p.pid: found for p in chosen if (found := t.active_for(p.pid)) is not None}
            if spec.periodic and active:  # periodic profiling never overlaps another trace: this moment is skipped
                return StartResult(
                    trace_id, tuple(p.pid for p in matched), (), tuple(active), "busy with another trace", jobs
                )
            preempted = preempt_periodic(t, self._side, trace_id, active) if not spec.periodic else {}
            holders = {pid: entry.trace_id for pid, (entry, _) in active.items() if pid not in preempted}
            busy = [p for p in chosen if p.pid in holders]
            todo = [p for p in chosen if p not in busy]
            # which trace holds them: `dyno-cli fetch --trace-id` of that one is what the user wants next
            held_by = ", ".join(sorted(set(holders.values())))
            if not todo:
                return StartResult(
                    trace_id,
                    tuple(p.pid for p in matched),
                    (),
                    tuple(p.pid for p in busy),
                    f"every matched process is already tracing (trace {held_by})",
                    jobs,
                )
            # one user's processes: a folder of that user's, which no other user may enter (trace_files)
            owners = {p.uid for p in todo}
            trust.make_trace_dir(self._trace_dir, trace_id, owners.pop() if len(owners) == 1 else None)
            for p in todo:
                trace.procs[p.pid] = parts[p.pid]
            t.traces[trace_id] = trace
            t.evict_old()
            for p in todo:
                self._side(p.protocol).started(trace, trace.procs[p.pid])
            triggered = tuple(pt.view for pt in trace.procs.values())
        for p in todo:
            self._registry.set_busy(p.pid, trace_id)
        if preempted:
            t.write_records()
        msg = f"triggered {len(todo)} of {len(matched)} matched process(es)"
        if preempted:
            msg += f"; periodic trace {', '.join(sorted(set(preempted.values())))} cancelled in {len(preempted)}"
        if busy:
            msg += f"; {len(busy)} busy with another trace ({held_by})"
        log.info("trace %s (job %r): %s", trace_id, spec.job_id, msg)
        self._on_start()
        if self.trace_listener is not None:
            self.trace_listener(tuple(p.pid for p in todo))
        return StartResult(trace_id, tuple(p.pid for p in matched), triggered, tuple(p.pid for p in busy), msg, jobs)

    def roles(self, procs: list[RegisteredProcess]) -> dict[int, str]:
        """pid -> role (dyno.daemon.process_roles) of each of `procs`, within its job, as a job-wide request sees it;
        the DataLoader workers as recently read (listed_workers). A trace request reads them fresh."""
        return job_roles(procs, self._data_workers(procs, fresh=False))

    def _data_workers(self, procs: list[RegisteredProcess], *, fresh: bool) -> set[int]:
        """Pids of DataLoader workers among `procs`; /proc reads, made before taking the table's lock."""
        return set().union(*(side.data_workers(procs, fresh=fresh) for side in self._sides))

    def _new_proc_trace(self, trace: TraceEntry, p: RegisteredProcess, now: int) -> ProcTrace:
        path, config = self._side(p.protocol).new_part(trace, p)
        view = ProcessTraceView(
            p.pid, p.job_id, p.rank, p.protocol, TraceState.PENDING, str(path), updated_ms=now, uid=p.uid
        )
        return ProcTrace(view, created_ms=now, kineto_config=config)

    # -- queries ----------------------------------------------------------------------------------------------

    def get(self, trace_id: str) -> TraceView:
        with self._known(trace_id) as trace:
            return self.table.view(trace)

    @contextlib.contextmanager
    def _known(self, trace_id: str) -> Iterator[TraceEntry]:
        """The trace (from its record, after a restart), under the table's lock; UnknownTraceError when none."""
        t = self.table
        t.recover(trace_id)
        with t.lock:
            trace = t.traces.get(trace_id)
            if trace is None:
                raise t.unknown(trace_id)
            yield trace

    def forget(self, trace_ids: Collection[str]) -> None:
        """Retention deleted these folders: drop their finished traces from memory too (NOT_FOUND from now on)."""
        t = self.table
        with t.lock:
            for tid in trace_ids:
                trace = t.traces.get(tid)
                if trace is not None and trace.finished():
                    del t.traces[tid]

    def active_traces(self) -> int:
        with self.table.lock:
            return sum(not e.finished() for e in self.table.traces.values())

    def active_trace_ids(self) -> set[str]:
        with self.table.lock:
            return {tid for tid, e in self.table.traces.items() if not e.finished()}

    def cancel(self, trace_id: str) -> TraceView:
        t = self.table
        with self._known(trace_id) as trace:
            for pt in trace.procs.values():
                if pt.view.state not in FINAL_STATES:
                    note = self._side(pt.view.protocol).cancel(trace, pt)
                    t.set(trace, pt, TraceState.CANCELLED, note, reason=TraceReason.CANCELLED_BY_REQUEST)
        t.write_records()
        return self.get(trace_id)

    def trace_file(self, trace_id: str, pid: int) -> Path:
        """The completed file of one process; UnknownTraceError if there is none (yet)."""
        try:
            validate_trace_id(trace_id)
        except ValueError as e:
            raise TraceRequestError("trace_id", str(e)) from None
        t = self.table
        t.recover(trace_id)
        with t.lock:
            trace = t.traces.get(trace_id)
            pt = trace.procs.get(pid) if trace is not None else None
            if trace is not None and pt is None:
                raise UnknownTraceError(f"pid {pid} is not part of trace {trace_id!r}")
            if pt is not None and pt.view.state != TraceState.DONE:
                raise UnknownTraceError(
                    f"trace {trace_id!r} pid {pid} has no file: {pt.view.state.value}"
                    + (f" ({pt.view.error})" if pt.view.error else ""),
                    ErrorReason.NO_TRACE_FILE,
                )
        problem = trust.trace_dir_problem(self._trace_dir)  # its folders may be another user's symlinks by now
        if problem is not None:
            raise UnknownTraceError(
                f"trace files are not served from this trace dir: {problem}", ErrorReason.TRACE_DIR_UNUSABLE
            )
        # The path it was done at (a recovered trace's may name another host name), else whatever is on disk
        path = trust.find_trace_file(self._trace_dir, trace_id, self._hostname, pid, Path(pt.view.path) if pt else None)
        if path is None:
            raise UnknownTraceError(
                f"no file for trace {trace_id!r} pid {pid} on host {self._hostname}", ErrorReason.NO_TRACE_FILE
            )
        return path

    # -- housekeeping -----------------------------------------------------------------------------------------

    def housekeeping(self) -> None:
        """Completion of kineto files, timeouts, then registry garbage collection. Call every ~0.5 s."""
        self._check_files_and_timeouts()
        self._registry.collect_garbage()
        self._sweep_when_gone()
        self.table.write_records()

    def _check_files_and_timeouts(self) -> None:
        notes = {id(side): side.file_notes() for side in self._sides}  # outside the lock: file reads
        now = self._clock_ms()
        t = self.table
        with t.lock:
            for trace in t.traces.values():
                if trace.finished():
                    continue
                for pt in trace.procs.values():
                    state = pt.view.state
                    if state in FINAL_STATES:
                        continue
                    side = self._side(pt.view.protocol)
                    if side.check(trace, pt, notes[id(side)], now):
                        continue
                    if state == TraceState.PENDING and now - pt.created_ms > t.delivery_timeout_ms:
                        why = f"not picked up within {t.delivery_timeout_ms / 1000:.0f} s ({side.pending_hint})"
                        t.set(trace, pt, TraceState.TIMED_OUT, why, reason=TraceReason.NOT_PICKED_UP)
                    elif state != TraceState.PENDING and pt.deadline_ms and now > pt.deadline_ms:
                        hint = (
                            " (iteration trace: does the program call optimizer.step()?)"
                            if trace.spec.iterations is not None
                            else ""
                        )
                        why = side.deadline_reason(trace, pt, now, hint)
                        t.set(trace, pt, TraceState.TIMED_OUT, why, reason=TraceReason.DEADLINE_PASSED)

    def _on_process_removed(self, rec: RegisteredProcess, reason: str) -> None:
        """A registered process's removal fails its active trace's part (unless its side finds it finished) and
        removes what its traces left, once the process is gone."""
        notes = self._side(rec.protocol).file_notes(rec.pid, rec.uid)  # outside the lock: file reads
        # nothing of a process that may still write its file is removed until it is gone (_sweep_when_gone)
        alive = self._side(rec.protocol).outlives_registration(rec)
        t = self.table
        with t.lock:
            found = t.active_for(rec.pid)
            if found is not None:
                trace, pt = found
                self._side(pt.view.protocol).removed(trace, pt, reason, rec.uid, notes)
            if alive:
                self._unswept[rec.pid] = None
                while len(self._unswept) > _MAX_UNSWEPT:  # their files stay until retention
                    del self._unswept[next(iter(self._unswept))]
                leftovers = []
            else:
                leftovers = self._leftovers(rec.pid)
        remove_leftovers(leftovers)  # outside the lock: disk I/O
        t.write_records()

    def _sweep_when_gone(self) -> None:
        """The leftovers of processes removed while still running (see _on_process_removed), once they are gone.
        One registered again is left to that registration's end (its removal sweeps them)."""
        with self.table.lock:
            pids = list(self._unswept)
        if not pids:
            return
        again = {pid for pid in pids if self._registry.get(pid) is not None}
        gone = [pid for pid in pids if pid not in again and not self._registry.is_alive(pid)]  # /proc reads
        with self.table.lock:
            for pid in (*again, *gone):
                self._unswept.pop(pid, None)
            leftovers = [path for pid in gone for path in self._leftovers(pid)]
        remove_leftovers(leftovers)

    def _leftovers(self, pid: int) -> list[Path]:
        """Under the table's lock, once a process is gone: what its traces that did not end done may have left."""
        return [p for e in self.table.traces.values() if pid in e.procs for p in leftover_paths(e.procs[pid].view)]

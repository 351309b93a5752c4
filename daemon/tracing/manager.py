"""Trace lifecycle: match a request to registered processes, hand configs over, track per-process state.

Per process: pending -> delivered -> running -> done | failed | timed_out | cancelled, always with a reason when
it did not end in done. Plain Python (no gRPC): the agent service, the kineto endpoint and the Dyno RPCs call in.
Its parts: trace_table.py (the traces and their state changes), trace_kineto.py (libkineto's polls and files),
trace_agents.py (the agents' streams and reports); this module adds requests, queries and housekeeping.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from pathlib import Path

from dyno.daemon.process_roles import job_roles, order_for_limit
from dyno.daemon.registry import PROTOCOL_AGENT, PROTOCOL_KINETO, ProcessRecord
from dyno.daemon.tracing import files as tf
from dyno.daemon.tracing.agent_side import AgentTraces
from dyno.daemon.tracing.kineto_side import KinetoTraces
from dyno.daemon.tracing.leftovers import leftover_paths, remove_leftovers
from dyno.daemon.tracing.requests import validate_spec, why_nothing
from dyno.daemon.tracing.table import RESUMED_TIMEOUT, ProcTrace, TraceEntry
from dyno.daemon.tracing.values import (
    FINAL_STATES,
    AgentCancelCommand,
    ProcessTraceView,
    StartResult,
    TraceLimitError,
    TraceRequestError,
    TraceSpec,
    TraceState,
    TraceView,
    UnknownTraceError,
)
from dyno.trace_ids import validate_trace_id

# The values it takes and returns live in dyno.daemon.tracing.values; import them from there.
__all__ = ["TraceManager", "order_for_limit"]

log = logging.getLogger(__name__)

_MAX_UNSWEPT = 4096  # processes whose leftovers wait for them to end (see TraceManager._on_process_removed)


def _only_launchers(spec: TraceSpec, selected: list[ProcessRecord], hostname: str) -> str:
    """Why a request selected torch launchers only (never traced), naming them; "" when it selected none."""
    launchers = [p for p in selected if p.launcher]
    if not launchers:
        return ""
    which = ", ".join(f"pid {p.pid} ({p.launcher})" for p in launchers)
    return (
        f"only torch's launcher of job {spec.job_id!r} matched on host {hostname} ({which}), and a launcher is never "
        "traced: its workers have not registered (yet: libkineto registers a process when it imports torch)"
    )


def _others_only(spec: TraceSpec, others: list[ProcessRecord], uid: int, hostname: str) -> str:
    """Why a request of user `uid` matched only other users' processes."""
    pids = ", ".join(str(p.pid) for p in others[:8]) + ("..." if len(others) > 8 else "")
    return (
        f"the {len(others)} matching process(es) of job {spec.job_id!r} on host {hostname} (pid {pids}) run as other "
        f"users: uid {uid} may trace only its own processes (root, dynod's user and its admin group trace any)"
    )


# how old a "not a DataLoader worker (yet)" may be in the process list's roles (torch names a worker once its loop runs)
LISTED_WORKERS_MAX_AGE_MS = 1000


class TraceManager(KinetoTraces, AgentTraces):
    """Built as TraceTable is (registry, trace_dir, hostname, timeouts, limits, clock, kineto identifier)."""

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
                why = _others_only(spec, others, only_uid, self._hostname)
                return StartResult(trace_id, (), (), (), why, tuple(self._registry.jobs()))
        # torch's launcher is never traced, even by its own pid: it only waits for its workers (an iteration trace
        # of it is libkineto's 500 ms fallback window), and `--pids <torchrun's pid>` means its workers, which match
        # by ancestry, as on the agent path, where the launcher never registers.
        matched = [p for p in selected if not p.launcher]
        jobs = tuple(self._registry.jobs())
        if not matched:
            why = _only_launchers(spec, selected, self._hostname) or why_nothing(
                spec, [p.pid for p in procs], jobs, self._hostname
            )
            return StartResult(trace_id, (), (), (), why, jobs)
        chosen = order_for_limit(matched, self._data_workers(matched) if spec.process_limit else ())
        if spec.process_limit:
            chosen = chosen[: spec.process_limit]
        now = self._clock_ms()
        # Each process's part (paths, libkineto's config line) before taking the lock: ~50 ms for 1,000 processes,
        # which libkineto's polls (they wait ~90 ms for a reply) would otherwise wait for.
        trace = TraceEntry(trace_id, spec, now)
        parts = {p.pid: self._new_proc_trace(trace, p, now) for p in chosen}
        with self._lock:
            # On disk too: a trace from before a restart, or evicted from memory, keeps its folder and files
            if trace_id in self._traces or (self._trace_dir / trace_id).exists():
                raise TraceRequestError("trace_id", f"{trace_id!r} is already in use on this host")
            if sum(not t.finished() for t in self._traces.values()) >= self._max_active:
                raise TraceLimitError(f"{self._max_active} traces are already active on this host")
            holders = {p.pid: found[0].trace_id for p in chosen if (found := self._active_for(p.pid)) is not None}
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
            tf.make_trace_dir(self._trace_dir, trace_id, owners.pop() if len(owners) == 1 else None)
            for p in todo:
                trace.procs[p.pid] = parts[p.pid]
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
            msg += f"; {len(busy)} busy with another trace ({held_by})"
        log.info("trace %s (job %r): %s", trace_id, spec.job_id, msg)
        self._on_start()
        return StartResult(trace_id, tuple(p.pid for p in matched), triggered, tuple(p.pid for p in busy), msg, jobs)

    def roles(self, procs: list[ProcessRecord]) -> dict[int, str]:
        """pid -> role (dyno.daemon.process_roles) of each of `procs`, within its job, as a job-wide request sees it;
        /proc reads for the kineto processes (their task names), each at most once per LISTED_WORKERS_MAX_AGE_MS
        until it is a worker (which it stays). **Why:** ListProcesses, which shows the roles, is what monitoring
        polls; ~500 reads per call took ~18 ms of the GIL. A trace request reads them fresh (_data_workers)."""
        now = self._clock_ms()
        memo = self._listed_workers
        workers = set()
        for p in procs:
            if p.protocol != PROTOCOL_KINETO:
                continue
            hit = memo.get(p.pid)
            if hit is None or hit[0] != p.start_time or (not hit[2] and now - hit[1] >= LISTED_WORKERS_MAX_AGE_MS):
                memo[p.pid] = hit = (p.start_time, now, self._identifier.is_data_worker(p.pid))
            if hit[2]:
                workers.add(p.pid)
        if len(memo) > 2 * len(self._registry) + 64:  # bounded by the registry: forget the pids it no longer has
            self._listed_workers = {pid: e for pid, e in list(memo.items()) if self._registry.get(pid) is not None}
        return job_roles(procs, workers)

    def _data_workers(self, procs: list[ProcessRecord]) -> set[int]:
        """Pids of DataLoader workers among kineto processes (the agent never registers one); /proc reads, made
        before taking self._lock."""
        return {p.pid for p in procs if p.protocol == PROTOCOL_KINETO and self._identifier.is_data_worker(p.pid)}

    def _new_proc_trace(self, trace: TraceEntry, p: ProcessRecord, now: int) -> ProcTrace:
        if p.protocol == PROTOCOL_KINETO:
            path, config = self._kineto_config(trace, p)
        else:
            path = tf.agent_output(self._trace_dir, trace.trace_id, self._hostname, p.pid)
            config = ""
        view = ProcessTraceView(
            p.pid, p.job_id, p.rank, p.protocol, TraceState.PENDING, str(path), updated_ms=now, uid=p.uid
        )
        return ProcTrace(view, created_ms=now, kineto_config=config)

    # -- queries ----------------------------------------------------------------------------------------------

    def get(self, trace_id: str) -> TraceView:
        self._recover(trace_id)
        with self._lock:
            trace = self._traces.get(trace_id)
            if trace is None:
                raise self._unknown(trace_id)
            return self._view(trace)

    def forget(self, trace_ids: Collection[str]) -> None:
        """Retention deleted these folders: drop their finished traces from memory too (NOT_FOUND from now on)."""
        with self._lock:
            for tid in trace_ids:
                trace = self._traces.get(tid)
                if trace is not None and trace.finished():
                    del self._traces[tid]

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
        problem = tf.trace_dir_problem(self._trace_dir)  # its folders may be another user's symlinks by now
        if problem is not None:
            raise UnknownTraceError(f"trace files are not served from this trace dir: {problem}")
        # The path it was done at (a recovered trace's may name another host name), else whatever is on disk
        path = tf.find_trace_file(self._trace_dir, trace_id, self._hostname, pid, Path(pt.view.path) if pt else None)
        if path is None:
            raise UnknownTraceError(f"no file for trace {trace_id!r} pid {pid} on host {self._hostname}")
        return path

    # -- housekeeping -----------------------------------------------------------------------------------------

    def housekeeping(self) -> None:
        """Completion of kineto files, timeouts, then registry garbage collection. Call every ~0.5 s."""
        self._check_files_and_timeouts()
        self._registry.collect_garbage()
        self._sweep_when_gone()
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
                        if not (pt.deadline_ms and now > pt.deadline_ms):  # what it waits for (kineto_progress)
                            self._set_waiting(trace, pt, self._kineto_progress(trace, pt, now).waiting_note())
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
                        self._set(trace, pt, TraceState.TIMED_OUT, self._deadline_reason(trace, pt, now))

    def _deadline_reason(self, trace: TraceEntry, pt: ProcTrace, now: int) -> str:
        """Under self._lock: why a process that picked the request up timed out at dynod's deadline: what it was
        waiting for (an agent's last waiting note; for libkineto, what its polls tell, see kineto_progress), with what
        to do."""
        hint = (
            " (iteration trace: does the program call optimizer.step()?)" if trace.spec.iterations is not None else ""
        )
        if pt.view.protocol == PROTOCOL_KINETO:
            discarded = tf.discard_unfinished_kineto_file(Path(pt.view.path))  # a failed write or a refused start
            if discarded:
                return f"no complete trace file by the deadline{discarded}"
            return (
                self._kineto_progress(trace, pt, now).deadline_reason()
                or f"no complete trace file by the deadline{hint}"
            )
        if pt.resumed and not pt.heard:  # its waiting note, if any, is the record's, from before the restart
            before = f"; before the restart it was waiting: {pt.view.waiting}" if pt.view.waiting else ""
            return f"no complete trace file by the deadline ({RESUMED_TIMEOUT}{before})"
        if pt.view.waiting:
            return f"no complete trace file by the deadline: {pt.view.waiting}"
        if pt.resumed:
            return f"no complete trace file by the deadline ({RESUMED_TIMEOUT})"
        return f"no complete trace file by the deadline{hint}"

    def _on_process_removed(self, rec: ProcessRecord, reason: str) -> None:
        notes = self._kineto_notes(rec.pid, rec.uid) if rec.protocol == PROTOCOL_KINETO else {}
        # An agent process whose Watch stream ended while it still runs (its connection broke) goes on with its
        # trace, and may yet publish its file and report it (trace_agents._revive): nothing of it is removed until
        # the process is gone (_sweep_when_gone). Asked first: a process found gone here writes nothing after the
        # file check below.
        alive = rec.protocol == PROTOCOL_AGENT and self._registry.is_alive(rec.pid)
        with self._lock:
            found = self._active_for(rec.pid)
            if found is not None:
                trace, pt = found
                # a kineto process may have finished its file and exited right after; an agent one may have
                # published its file just before its stream ended, its DONE report still on the way
                kineto_started = pt.view.protocol == PROTOCOL_KINETO and pt.view.state != TraceState.PENDING
                if kineto_started and self._kineto_file_check(trace, pt, notes, rec.uid):
                    pass
                elif not self._finished_at_disconnect(trace, pt, rec.uid):
                    if pt.view.state == TraceState.PENDING:
                        why = f"{reason} before picking up the trace"
                    elif kineto_started:  # at once: libkineto polls while it lives (kineto_progress)
                        why = f"{reason} before the trace finished{self._kineto_progress(trace, pt).exit_detail()}"
                    else:
                        why = f"{reason} mid-trace"  # an agent's: trace_agents.REVIVED_NOTE relies on this text
                    self._set(trace, pt, TraceState.FAILED, why)
            if alive:
                self._unswept[rec.pid] = None
                while len(self._unswept) > _MAX_UNSWEPT:  # their files stay until retention
                    del self._unswept[next(iter(self._unswept))]
                leftovers = []
            else:
                leftovers = self._leftovers(rec.pid)
        remove_leftovers(leftovers)  # outside the lock: disk I/O
        self._write_records()

    def _sweep_when_gone(self) -> None:
        """The leftovers of processes removed while still running (see _on_process_removed), once they are gone.
        One registered again is left to that registration's end (its removal sweeps them)."""
        with self._lock:
            pids = list(self._unswept)
        if not pids:
            return
        again = {pid for pid in pids if self._registry.get(pid) is not None}
        gone = [pid for pid in pids if pid not in again and not self._registry.is_alive(pid)]  # /proc reads
        with self._lock:
            for pid in (*again, *gone):
                self._unswept.pop(pid, None)
            leftovers = [path for pid in gone for path in self._leftovers(pid)]
        remove_leftovers(leftovers)

    def _leftovers(self, pid: int) -> list[Path]:
        """Under self._lock, once a process is gone: what its traces that did not end done may have left."""
        return [p for t in self._traces.values() if pid in t.procs for p in leftover_paths(t.procs[pid].view)]

"""The dyno agent side of the trace manager: each agent's Watch stream has a command queue; the agent reports its
trace running, done (believed only when the file is there) or failed.

A trace that was recording when dynod restarted goes on in the agent, which writes its file to the path it was
given and reports it done to the restarted daemon once registered again. That daemon never knew the trace (the old
one wrote no record of an unfinished trace): it takes the trace on from the report (`_adopt`), when the file is where
the daemon names such a file, in a folder dynod made, owned by the reporting process's user, and writes its record,
so that GetTrace, FetchTraceFile and `dyno-cli fetch --trace-id` find it like any finished trace.
"""

from __future__ import annotations

import logging
import os
import queue
import stat
from dataclasses import replace
from pathlib import Path

from dyno import trace_layout
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.tracing import journal as tj
from dyno.daemon.tracing import trust
from dyno.daemon.tracing.protocol import FileNotes
from dyno.daemon.tracing.table import ProcTrace, TraceEntry, TraceTable
from dyno.daemon.tracing.values import (
    FINAL_STATES,
    AgentCancelCommand,
    AgentCommand,
    AgentTraceCommand,
    ProcessTraceView,
    TraceReason,
    TraceRequestError,
    TraceSpec,
    TraceState,
    UnknownTraceError,
)
from dyno.trace_ids import is_trace_id

__all__ = [
    "AgentSide",
    "ADOPTED_NOTE",
    "FINISHED_NOTE",
    "GONE_REASON",
    "RESTARTED_PENDING",
    "RESUMED_NOTE",
    "RESUMED_TIMEOUT",
    "REVIVED_NOTE",
]

log = logging.getLogger(__name__)
R = TraceReason

ADOPTED_NOTE = (
    "recording when dynod restarted: the agent finished the trace and reported its file to the restarted daemon, "
    "which does not know the request's options"
)
REVIVED_NOTE = (
    "the agent's connection to dynod broke while the trace was recording (it was reported failed then); the agent "
    "finished the trace and reported its file once connected again"
)
RESUMED_NOTE = (
    "recording when dynod restarted: the agent finished the trace and reported its file to the restarted daemon, "
    "which knew the trace from its folder's record"
)
FINISHED_NOTE = (
    "its connection to dynod ended as it finished the trace: the file was complete, its done report had not arrived"
)
GONE_REASON = "process exited or disconnected"  # why an agent's registration ends with its Watch stream
_LATE_DONE = "the agent reported it done afterwards"  # the note of a late DONE report not taken (_late_done)
RESTARTED_PENDING = "dynod restarted before the process picked the trace up"
RESUMED_TIMEOUT = "dynod restarted mid-trace, and the process did not report its file to the restarted daemon"
_MAX_ADOPTED = 1024  # ids of traces taken on from a report, kept at most (the oldest go first)


class AgentSide:
    """What dyno.daemon.agent_service calls (through the manager): attach and detach a Watch stream, delivered,
    report; and the manager's ProtocolSide for PROTOCOL_AGENT, over the shared TraceTable."""

    pending_hint = "no Watch stream from the agent"

    def __init__(self, table: TraceTable) -> None:
        self._t = table
        self._agent_queues: dict[int, tuple[str, queue.Queue[AgentCommand | None]]] = {}  # pid -> (session, queue)
        self._adopted: dict[str, None] = {}  # ids of the traces taken on from an agent's report (the oldest first)

    def agent_attach(
        self, pid: int, session_id: str, q: queue.Queue[AgentCommand | None] | None = None
    ) -> queue.Queue[AgentCommand | None]:
        """A Watch stream opened: its queue (`q`, or a new one), preloaded with this pid's undelivered trace, if any."""
        if q is None:
            q = queue.Queue()
        with self._t.lock:
            self._agent_queues[pid] = (session_id, q)
            found = self._t.active_for(pid)
            if found is not None and found[1].view.state == TraceState.PENDING:
                q.put(self._agent_command(*found))
        return q

    def agent_detach(self, pid: int, session_id: str) -> None:
        with self._t.lock:
            cur = self._agent_queues.get(pid)
            if cur is not None and cur[0] == session_id:
                del self._agent_queues[pid]

    def _send_agent(self, pid: int, command: AgentCommand) -> None:
        entry = self._agent_queues.get(pid)
        if entry is not None:
            entry[1].put(command)

    def _agent_command(self, trace: TraceEntry, pt: ProcTrace) -> AgentTraceCommand:
        deadline = self._t.completion_deadline(trace.spec, pt.created_ms + self._t.delivery_timeout_ms)
        return AgentTraceCommand(trace.trace_id, trace.spec, Path(pt.view.path), deadline)

    def agent_delivered(self, pid: int, trace_id: str) -> None:
        with self._t.lock:
            trace = self._t.traces.get(trace_id)
            pt = trace.procs.get(pid) if trace else None
            if trace is None or pt is None or pt.view.state != TraceState.PENDING:
                return
            now = self._t.clock_ms()
            pt.delivered_ms = now
            pt.deadline_ms = self._t.completion_deadline(trace.spec, now)
            self._t.set(trace, pt, TraceState.DELIVERED)

    def agent_report(self, pid: int, trace_id: str, state: TraceState, error: str = "", *, path: str = "") -> None:
        """RUNNING, DONE or FAILED from the agent; DONE is believed only when the assigned file is there. `error`:
        FAILED's reason, or an optional note with DONE (kept in the process's error field). DELIVERED (not recording
        yet) or RUNNING with `error`: a waiting note, why an iteration trace has not finished (no optimizer step for
        N s...; ProcessTraceView.waiting, "" clears it): dyno-cli shows it when it gives up on the process.
        `path`: where the agent wrote its file (DONE), which only a trace taken on from the report goes by (_adopt)."""
        self._t.recover(trace_id)  # known from its folder's record after a restart, if it has one
        with self._t.lock:
            trace = self._t.traces.get(trace_id)
            pt = trace.procs.get(pid) if trace else None
            if pt is None and state == TraceState.DONE and self._adopt(pid, trace_id, error, path) is not None:
                pass  # a trace recording when dynod restarted, finished by the agent: now known, done
            elif trace is None or pt is None:
                raise UnknownTraceError(f"no trace {trace_id!r} for pid {pid}")
            elif state in (TraceState.DELIVERED, TraceState.RUNNING):
                pt.heard = True
                if state == TraceState.RUNNING and pt.view.state in (TraceState.PENDING, TraceState.DELIVERED):
                    self._t.set(trace, pt, TraceState.RUNNING)
                self._t.set_waiting(trace, pt, error)
            elif state == TraceState.DONE and self._revive(trace, pt, error):
                pass  # failed when its connection broke, finished by the agent all the same
            elif state == TraceState.DONE and pt.view.state in FINAL_STATES:
                self._late_done(trace, pt)
            elif state == TraceState.DONE:
                rec = self._t.registry.get(pid)
                uid = pt.view.uid if pt.view.uid >= 0 or rec is None else rec.uid
                # believed only as the process's own file: see trust.trainer_file_stat
                st, problem = trust.trainer_file_check(Path(pt.view.path), uid)
                if st is None:
                    self._t.set(
                        trace, pt, TraceState.FAILED, f"agent reported done but {problem}", reason=R.FILE_NOT_BELIEVED
                    )
                else:
                    # A done trace's text is a note, not a failure (e.g. it ended early: the program exited).
                    note = "; ".join(n for n in (RESUMED_NOTE if pt.resumed else "", error) if n)
                    how = R.DONE_AFTER_RESTART if pt.resumed else R.NONE
                    self._t.set(trace, pt, TraceState.DONE, note, size=st.st_size, reason=how)
            elif state == TraceState.FAILED:
                self._t.set(
                    trace,
                    pt,
                    TraceState.FAILED,
                    error or "agent reported failure without a reason",
                    reason=R.AGENT_FAILED,
                )
            else:
                raise TraceRequestError(
                    "state", f"an agent reports delivered, running, done or failed, not {state.value}"
                )
        self._t.write_records()

    def _agent_file(self, pid: int, path: Path, uid: int = -1) -> os.stat_result | None:
        """The stat of an agent's reported file at `path` when it can be believed: a plain file with one link
        (lstat: a symlink is never followed), owned by `uid` (the traced process's user, when the trace knows it),
        else by the user of the registered agent process `pid` (none registered: not believed); else None."""
        if uid < 0:
            rec = self._t.registry.get(pid)
            if rec is None or rec.protocol != PROTOCOL_AGENT:
                return None
            uid = rec.uid
        return trust.trainer_file_check(path, uid)[0]

    def _revive(self, trace: TraceEntry, pt: ProcTrace, note: str) -> bool:
        """Under self._t.lock: a DONE report of a trace failed when the agent's stream ended (its connection broke;
        dynod stayed up), from the agent registered again or still on its old channel (it reports as it notices
        nothing yet): the agent kept recording, and its file is there (kept: see TraceManager._on_process_removed).
        Done after all, with REVIVED_NOTE; False (the report changes nothing) for any other final state."""
        if pt.view.state != TraceState.FAILED or pt.view.reason != R.DISCONNECTED_MID_TRACE:
            return False
        st = self._agent_file(pt.view.pid, Path(pt.view.path), pt.view.uid)
        if st is None:
            return False
        pt.view = replace(
            pt.view,
            state=TraceState.DONE,
            error="; ".join(n for n in (REVIVED_NOTE, note) if n),
            size_bytes=st.st_size,
            updated_ms=self._t.clock_ms(),
            reason=R.DONE_AFTER_RECONNECT,
        )
        log.info("trace %s pid %d: done (%s)", trace.trace_id, pt.view.pid, REVIVED_NOTE)
        self._t.queue_record(trace)  # its record said failed
        return True

    def _late_done(self, trace: TraceEntry, pt: ProcTrace) -> None:
        """Under self._t.lock: a DONE report of a process whose trace has ended otherwise (and was not revived): the
        state stays, and its reason says why the report was not taken, once, so that no file goes missing without
        a word (a repeated DONE of a done trace changes nothing)."""
        if pt.view.state == TraceState.DONE or pt.view.late_done:
            return
        why = (
            trust.trainer_file_check(Path(pt.view.path), pt.view.uid)[1] or f"it had ended {pt.view.state.value} first"
        )
        error = f"{pt.view.error}; {_LATE_DONE}, not taken: {why}" if pt.view.error else f"{_LATE_DONE}: {why}"
        pt.view = replace(pt.view, error=error, late_done=True)
        log.warning("trace %s pid %d: %s", trace.trace_id, pt.view.pid, error)
        self._t.queue_record(trace)  # its record is rewritten with the reason

    def _finished_at_disconnect(self, trace: TraceEntry, pt: ProcTrace, uid: int) -> bool:
        """Under self._t.lock: an agent process's registration ends while its trace is delivered or running, and the
        trace's file is there: the agent renames it into place only once complete, so it finished the trace and
        its DONE report had not arrived (or will never: the process exited right after). Done, with FINISHED_NOTE,
        not failed (and its file deleted as a leftover); False when there is no such file."""
        if pt.view.protocol != PROTOCOL_AGENT or pt.view.state == TraceState.PENDING:
            return False
        st = trust.trainer_file_check(Path(pt.view.path), uid)[0]
        if st is None:
            return False
        self._t.set(trace, pt, TraceState.DONE, FINISHED_NOTE, size=st.st_size, reason=R.DONE_AT_DISCONNECT)
        return True

    def _adopt(self, pid: int, trace_id: str, note: str, reported: str = "") -> ProcTrace | None:
        """Under self._t.lock: an agent reports done a trace (or its part in one) this daemon does not know: one that
        was recording when dynod restarted. Take it on, done, when its file checks out (see the module's doc) and
        queue its record; None (NOT_FOUND for the agent) otherwise. Two processes of one trace are taken on into
        the same entry."""
        trace = self._t.traces.get(trace_id)
        if trace is not None and (trace_id not in self._adopted or pid in trace.procs):
            return None  # a trace this daemon started, where pid has no part: not ours to extend
        rec = self._t.registry.get(pid)
        if rec is None or not is_trace_id(trace_id):
            return None
        folder = self._t.trace_dir / trace_id
        if trace is None and os.path.lexists(folder / tj.RECORD_NAME):
            return None  # a finished trace, recorded (GetTrace loads it): its record is not rewritten from a report
        try:
            fst = os.lstat(folder)  # lstat: a symlink in its place is not followed
        except OSError:
            return None
        if not (stat.S_ISDIR(fst.st_mode) and trust.made_by_dynod(folder, fst)):
            return None
        # where the old daemon told the agent to write (its host name may not be this one's), else this one's name
        path = trace_layout.reported_agent_output(
            self._t.trace_dir, trace_id, pid, reported
        ) or trace_layout.agent_output(self._t.trace_dir, trace_id, self._t.hostname, pid)
        st = self._agent_file(pid, path)
        if st is None:
            return None
        now = self._t.clock_ms()
        if trace is None:
            trace = TraceEntry(trace_id, TraceSpec(job_id=rec.job_id, trace_id=trace_id), now)
            self._t.traces[trace_id] = trace
            self._adopted[trace_id] = None
            while len(self._adopted) > _MAX_ADOPTED:
                del self._adopted[next(iter(self._adopted))]
            self._t.evict_old()
        view = ProcessTraceView(
            pid,
            rec.job_id,
            rec.rank,
            PROTOCOL_AGENT,
            TraceState.DONE,
            str(path),
            size_bytes=st.st_size,
            error="; ".join(n for n in (ADOPTED_NOTE, note) if n),
            updated_ms=now,
            uid=rec.uid,
            reason=R.DONE_AFTER_RESTART,
        )
        pt = trace.procs[pid] = ProcTrace(view, created_ms=now)
        log.info("trace %s pid %d: done (%s)", trace_id, pid, ADOPTED_NOTE)
        self._t.queue_record(trace)
        return pt

    # -- ProtocolSide ------------------------------------------------------------------------------------------

    def data_workers(self, procs: list[RegisteredProcess], *, fresh: bool) -> set[int]:
        return set()  # the agent never registers a DataLoader worker

    def new_part(self, trace: TraceEntry, p: RegisteredProcess) -> tuple[Path, str]:
        return trace_layout.agent_output(self._t.trace_dir, trace.trace_id, self._t.hostname, p.pid), ""

    def started(self, trace: TraceEntry, pt: ProcTrace) -> None:
        self._send_agent(pt.view.pid, self._agent_command(trace, pt))

    def cancel(self, trace: TraceEntry, pt: ProcTrace) -> str:
        self._send_agent(pt.view.pid, AgentCancelCommand(trace.trace_id))
        return "cancelled by request"

    def file_notes(self, pid: int | None = None, uid: int | None = None) -> FileNotes:
        return {}  # the agent reports its file

    def check(self, trace: TraceEntry, pt: ProcTrace, notes: FileNotes, now_ms: int) -> bool:
        return False  # the agent reports its part's end

    def deadline_reason(self, trace: TraceEntry, pt: ProcTrace, now_ms: int, hint: str) -> str:
        """The agent's last waiting note says what it was waiting for."""
        if pt.resumed and not pt.heard:  # its waiting note, if any, is the record's, from before the restart
            before = f"; before the restart it was waiting: {pt.view.waiting}" if pt.view.waiting else ""
            return f"no complete trace file by the deadline ({RESUMED_TIMEOUT}{before})"
        if pt.view.waiting:
            return f"no complete trace file by the deadline: {pt.view.waiting}"
        if pt.resumed:
            return f"no complete trace file by the deadline ({RESUMED_TIMEOUT})"
        return f"no complete trace file by the deadline{hint}"

    def removed(self, trace: TraceEntry, pt: ProcTrace, reason: str, uid: int, notes: FileNotes) -> None:
        """An agent may have published its file just before its stream ended, its DONE report still on the way."""
        if self._finished_at_disconnect(trace, pt, uid):
            return
        if pt.view.state == TraceState.PENDING:
            self._t.set(
                trace, pt, TraceState.FAILED, f"{reason} before picking up the trace", reason=R.GONE_BEFORE_PICKUP
            )
        else:
            # its Watch stream ended (GONE_REASON): the agent may still finish and report it (_revive)
            how = R.DISCONNECTED_MID_TRACE if reason == GONE_REASON else R.GONE_MID_TRACE
            self._t.set(trace, pt, TraceState.FAILED, f"{reason} mid-trace", reason=how)

    def outlives_registration(self, rec: RegisteredProcess) -> bool:
        """An agent process whose Watch stream ended while it still runs (its connection broke) goes on with its
        trace, and may yet publish its file and report it (_revive). Asked before the lock: a process found gone
        here writes nothing after the file check."""
        return self._t.registry.is_alive(rec.pid)

    def resume(self, trace: TraceEntry, pt: ProcTrace) -> str:
        """An agent process that had the request goes on recording, and reports its file to this daemon once
        registered again: it is waited for until its completion deadline (from when it was last known to have the
        request). One that had not picked it up cannot."""
        if pt.view.state == TraceState.PENDING:
            return RESTARTED_PENDING
        pt.resumed, pt.delivered_ms = True, pt.view.updated_ms
        pt.deadline_ms = self._t.completion_deadline(trace.spec, pt.view.updated_ms)
        return ""

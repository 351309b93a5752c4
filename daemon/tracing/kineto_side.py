"""The libkineto side of the trace manager: polls register processes (their identity read from /proc once) and
pick up pending configs; a kineto trace is done when its file is complete (libkineto reports nothing back).
KinetoSide is the manager's ProtocolSide for PROTOCOL_KINETO, over the shared TraceTable."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TypeVar

from dyno import trace_layout
from dyno.daemon.job_users import JobOfAnotherUserError
from dyno.daemon.registered_process import PROTOCOL_AGENT, PROTOCOL_KINETO, RegisteredProcess
from dyno.daemon.registry import RegistryFullError
from dyno.daemon.tracing import kineto_leftovers, trust
from dyno.daemon.tracing.kineto_config import ConfigValueError, trace_config
from dyno.daemon.tracing.kineto_identity import KinetoIdentifier, KinetoIdentity
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.kineto_progress import KinetoProgress
from dyno.daemon.tracing.kineto_window import iteration_fallback_note
from dyno.daemon.tracing.listed_workers import ListedWorkers
from dyno.daemon.tracing.protocol import FileNotes
from dyno.daemon.tracing.table import ProcTrace, TraceEntry, TraceTable
from dyno.daemon.tracing.values import TraceReason, TraceRequestError, TraceState
from dyno.logthrottle import ThrottledLog
from dyno.trace_options import profiler_flags

__all__ = ["KinetoSide"]

log = logging.getLogger(__name__)

V = TypeVar("V")  # a bookkeeping table's values (_put_bounded)

# libkineto's profiler thread looks at a handed-over config on its next tick (every 1 s, kControllerIntervalMsecs; the
# first trace of a process starts that thread, whose first tick comes 1 s later: measured, delivered at .414, checked
# at .423 of the next second). It refuses a PROFILE_START_TIME already past then ("Not starting tracing - start
# timestamp is in the past", on the trainer's stderr) and traces nothing; one still ahead it meets to the millisecond
# (measured: 0-5 ms late). So a start at least this far ahead when libkineto picks the request up is sent as it is;
# a closer one (libkineto polls every 5 s: with --start-delay-s 6 a late poller has ~1 s left) is moved
# to this far ahead of the pickup, where libkineto starts. Sending no start time instead (what dynod did) made
# libkineto start ~2.0 s after the pickup (measured: 1.97-2.05 s), later than this, and the note said "before".
_KINETO_START_MARGIN_MS = 1300
# libkineto asks for an activity config (type & 2) only while its profiler is idle: a process running the program's
# own torch.profiler (or any trace) polls without asking, and the request waited here, pending, until dyno-cli gave
# up (`the process had not picked the request up`). After this many such polls in a row it fails with the reason.
_BUSY_POLLS = 3
RESTARTED_KINETO = (
    "dynod restarted mid-trace: a libkineto process's trace is not followed across a restart (a file it writes "
    "stays in the trace's folder)"
)
_MAX_NOTES = 1024  # per-(trace, pid) bookkeeping kept at most: those of traces that never completed go first


class KinetoSide:
    """kineto_poll and kineto_context_count (what dyno.daemon.tracing.kineto_ipc.KinetoEndpoint calls, through the
    manager), the config of a kineto process's part in a trace, and the checks of kineto files for housekeeping."""

    pending_hint = "libkineto polls every ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS, default 5 s"

    def __init__(self, table: TraceTable, identifier: KinetoIdentifier) -> None:
        self._t = table
        self._identifier = identifier  # reads /proc/<pid>/{environ,cmdline}
        self._listed = ListedWorkers(table.registry, identifier, table.clock_ms)
        self._full_log = ThrottledLog(log, every_s=600.0)  # a full registry refuses every poll of every new pid
        # (trace id, pid) -> the note of a kineto trace that could not start at its synchronized time
        self._late_start_notes: dict[tuple[str, int], str] = {}
        # (trace id, pid) -> polls in a row that did not ask for an activity config while it was pending
        self._busy_polls: dict[tuple[str, int], int] = {}

    def kineto_poll(self, poll: KinetoPoll) -> str | None:
        ident = self._kineto_identity(poll)  # /proc reads, if any, before taking self._t.lock
        try:
            self._t.registry.register(
                RegisteredProcess(
                    pid=poll.pid,
                    job_id=ident.job_id,
                    job_aliases=ident.aliases,
                    protocol=PROTOCOL_KINETO,
                    ancestry=poll.ancestry,
                    uid=poll.uid,
                    cmdline=ident.cmdline,
                    hostname=self._t.hostname,
                    start_time=ident.start_time,
                    launcher=ident.launcher,
                    rank=ident.rank,
                    local_rank=ident.local_rank,
                    world_size=ident.world_size,
                )
            )
        except RegistryFullError as e:  # libkineto cannot be told why: it polls again in 5 s
            self._full_log.warning("full", "kineto poll not registered: %s", e)
            return None
        except JobOfAnotherUserError as e:  # likewise: the daemon's log says why it is never traced
            self._full_log.warning("job", "kineto poll not registered: %s", e)
            return None
        now = self._t.clock_ms()
        with self._t.lock:
            found = self._t.active_for(poll.pid)
            if found is None:
                return None
            trace, pt = found
            if pt.view.protocol != PROTOCOL_KINETO:
                return None
            if pt.view.state == TraceState.PENDING and poll.wants_activities:
                self._busy_polls.pop((trace.trace_id, poll.pid), None)
                pt.delivered_ms = now
                pt.deadline_ms = self._t.completion_deadline(trace.spec, now)
                self._t.set(trace, pt, TraceState.DELIVERED)
                return self._late_start_config(trace, poll.pid, now) or pt.kineto_config
            if pt.view.state == TraceState.PENDING:
                self._busy_poll(trace, pt)
                return None
            if pt.view.state == TraceState.DELIVERED and not poll.wants_activities:
                # libkineto stops asking for activity configs while one is pending or running.
                self._t.set(trace, pt, TraceState.RUNNING)
        return None

    def _busy_poll(self, trace: TraceEntry, pt: ProcTrace) -> None:
        """Under self._t.lock: a poll that does not ask for an activity config while this process's part is pending."""
        key = (trace.trace_id, pt.view.pid)
        polls = self._busy_polls.pop(key, 0) + 1
        if polls < _BUSY_POLLS:
            _put_bounded(self._busy_polls, key, polls)
            return
        self._t.set(
            trace,
            pt,
            TraceState.FAILED,
            f"libkineto in this process took no on-demand trace in {polls} polls in a row: its profiler is busy, "
            "with the program's own torch.profiler or an earlier trace it is still recording (one dyno-cli gave up "
            "on); trace again when it has stopped",
            reason=TraceReason.PROFILER_BUSY,
        )

    def _late_start_config(self, trace: TraceEntry, pid: int, now_ms: int) -> str | None:
        """Under self._t.lock, at delivery: the config to send instead of the prepared one when the trace's start time
        is too close (or past) for libkineto to make it: the same with the start moved to _KINETO_START_MARGIN_MS
        ahead, and a note for the done trace saying how late that is. None when the prepared config stands."""
        start = trace.spec.start_time_ms
        if not start or start - now_ms >= _KINETO_START_MARGIN_MS:
            return None
        moved = now_ms + _KINETO_START_MARGIN_MS
        try:
            config = self._config_line(trace, start_time_ms=moved)
        except TraceRequestError:
            return None
        off_s = abs(now_ms - start) / 1000.0
        when = f"{off_s:.1f} s {'after' if now_ms >= start else 'before'} it"
        late = f"started {(moved - start) / 1000.0:.1f} s after the synchronized start time"
        _put_bounded(
            self._late_start_notes,
            (trace.trace_id, pid),
            f"{late}: libkineto picked the request up {when} (it polls every 5 s, and needs about "
            f"{_KINETO_START_MARGIN_MS / 1000.0:g} s to start a trace), so not aligned with the other processes; use a "
            f"--start-delay-s longer than libkineto's poll interval plus {_KINETO_START_MARGIN_MS / 1000.0:g} s",
        )
        log.debug("trace %s pid %d: picked up %s; libkineto starts at %d", trace.trace_id, pid, when, moved)
        return config

    def _kineto_progress(self, trace: TraceEntry, pt: ProcTrace, now_ms: int | None = None) -> KinetoProgress:
        """Under self._t.lock: what dynod knows of this process's part (kineto_progress): it turned RUNNING at its
        last state change (updated_ms); its last poll is the registry's last_seen_ms (0 once it is gone)."""
        rec = self._t.registry.get(pt.view.pid)
        last_poll = rec.last_seen_ms if rec is not None else 0
        now = self._t.clock_ms() if now_ms is None else now_ms
        return KinetoProgress(trace.spec, pt.view.state, pt.delivered_ms, pt.view.updated_ms, now, last_poll)

    def _kineto_identity(self, poll: KinetoPoll) -> KinetoIdentity:
        """Cached with the registration: the environment and command line (so whether it is torch's launcher) are
        read on a pid's first poll only. The cache is keyed on the process, not the pid: its start time
        (/proc/<pid>/stat, read on every poll) differs for a later process reusing the pid, even one of the same uid
        and kineto job id polling before housekeeping (~0.5 s) dropped the old one; that one is read again. Another
        uid or kineto job id is another process too."""
        known = self._t.registry.get(poll.pid)
        if known is not None and known.protocol == PROTOCOL_AGENT and known.connected:
            return KinetoIdentity(known.job_id, known.job_aliases, known.cmdline)  # the registry keeps the agent
        if known is not None and known.protocol == PROTOCOL_KINETO:
            start_time = self._identifier.start_time(poll.pid)
            if known.same_process(start_time) and known.uid == poll.uid and known.answers_to(poll.job_id):
                return KinetoIdentity(
                    known.job_id,
                    known.job_aliases,
                    known.cmdline,
                    start_time or known.start_time,
                    known.launcher,
                    rank=known.rank,
                    local_rank=known.local_rank,
                    world_size=known.world_size,
                )
        return self._identifier.identify(poll.pid, poll.job_id)

    def kineto_context_count(self, gpu: int, pid: int, job_id: str) -> int:
        known = self._t.registry.get(pid)
        if known is not None and known.answers_to(job_id):
            job_id = known.job_id
        else:  # not registered yet: the id its first poll will register under
            job_id = self._identifier.job_id(pid) or job_id
        return sum(1 for p in self._t.registry.list(job_id) if p.protocol == PROTOCOL_KINETO and p.gpu == gpu) or 1

    def _config_line(self, trace: TraceEntry, start_time_ms: int | None) -> str:
        spec = trace.spec
        try:
            return trace_config(
                trace_id=trace.trace_id,
                log_file=trace_layout.kineto_log_file(self._t.trace_dir, trace.trace_id, self._t.hostname),
                duration_ms=spec.duration_ms,
                iterations=spec.iterations,
                start_time_ms=start_time_ms,
                start_iteration_roundup=spec.start_iteration_roundup,
                **profiler_flags(spec),
            )
        except ConfigValueError as e:  # e.g. a trace dir path containing '=': never send a broken line
            raise TraceRequestError("trace_id", f"cannot express this trace for libkineto: {e}") from None

    def _traced_uid(self, pid: int) -> int:
        """The user of the registered process `pid` (the kernel's word, SCM_CREDENTIALS), -1 when not registered."""
        rec = self._t.registry.get(pid)
        return rec.uid if rec is not None else -1

    def _kineto_notes(self, pid: int | None = None, uid: int | None = None) -> dict[tuple[str, int], str]:
        """The done notes of kineto iteration traces (of `pid`, or all) whose file is complete, keyed by (trace id,
        pid): read from the files outside self._t.lock (a file may be large), so they are there when the trace turns
        done. "" when libkineto recorded the iterations; a note when it fell back to its 500 ms window. Only files
        that can be the process's are read (trust.trainer_file_stat: never a FIFO another user put there, which
        blocked this thread for good, nor a symlink to /dev/zero, read forever); `uid`: the user of `pid`, when it is
        no longer registered."""
        with self._t.lock:
            todo = [
                (t.trace_id, pt.view.pid, Path(pt.view.path), t.spec.iterations)
                for t in self._t.traces.values()
                if t.spec.iterations is not None and not t.finished()
                for pt in t.procs.values()
                if pt.view.protocol == PROTOCOL_KINETO
                and pt.view.state in (TraceState.DELIVERED, TraceState.RUNNING)
                and pid in (None, pt.view.pid)
            ]
        return {
            (tid, p): iteration_fallback_note(path, n)
            for tid, p, path, n in todo
            if trust.trainer_file_check(path, self._traced_uid(p) if uid is None else uid)[0] is not None
        }

    def _kineto_file_check(
        self, trace: TraceEntry, pt: ProcTrace, notes: dict[tuple[str, int], str], uid: int | None = None
    ) -> bool:
        """Under self._t.lock: True when the process's part is over: its kineto file is complete (state set to done,
        with its note from `notes`; an iteration trace's file not looked at yet waits for the next round), or what
        is at its name cannot be its file (failed, saying why: see trust.trainer_file_stat). `uid`: the process's
        user, when it is no longer registered."""
        path = Path(pt.view.path)
        key = (trace.trace_id, pt.view.pid)
        try:
            size = trust.trainer_file_stat(path, self._traced_uid(pt.view.pid) if uid is None else uid).st_size
        except trust.UntrustedFileError as e:
            why = f"{path} {e.strerror}: not taken as this process's trace"
            self._t.set(trace, pt, TraceState.FAILED, why, reason=TraceReason.FILE_NOT_BELIEVED)
            return True
        except OSError:
            if pt.view.state == TraceState.DELIVERED and os.path.lexists(trace_layout.kineto_tmp(path)):
                self._t.set(trace, pt, TraceState.RUNNING)
            return False
        if trace.spec.iterations is not None and key not in notes:
            return False
        note = "; ".join(n for n in (notes.get(key, ""), self._late_start_notes.pop(key, "")) if n)
        self._t.set(trace, pt, TraceState.DONE, note, size=size)
        return True

    # -- ProtocolSide ------------------------------------------------------------------------------------------

    def data_workers(self, procs: list[RegisteredProcess], *, fresh: bool) -> set[int]:
        kineto = [p for p in procs if p.protocol == PROTOCOL_KINETO]
        if not fresh:
            return self._listed.workers(kineto)
        return {p.pid for p in kineto if self._identifier.is_data_worker(p.pid)}

    def new_part(self, trace: TraceEntry, p: RegisteredProcess) -> tuple[Path, str]:
        """The output path and the libkineto config line of one process's part in a trace."""
        path = trace_layout.kineto_output(self._t.trace_dir, trace.trace_id, self._t.hostname, p.pid)
        return path, self._config_line(trace, trace.spec.start_time_ms)

    def started(self, trace: TraceEntry, pt: ProcTrace) -> None:
        """libkineto picks the request up on its next poll."""

    def cancel(self, trace: TraceEntry, pt: ProcTrace) -> str:
        if pt.view.state == TraceState.PENDING:
            return "cancelled by request"
        return "cancelled by request (libkineto may still write its file; it is ignored)"

    def file_notes(self, pid: int | None = None, uid: int | None = None) -> FileNotes:
        return self._kineto_notes(pid, uid)

    def check(self, trace: TraceEntry, pt: ProcTrace, notes: FileNotes, now_ms: int) -> bool:
        if pt.view.state == TraceState.PENDING:
            return False
        if self._kineto_file_check(trace, pt, notes):
            return True
        if not (pt.deadline_ms and now_ms > pt.deadline_ms):  # what it waits for (kineto_progress)
            self._t.set_waiting(trace, pt, self._kineto_progress(trace, pt, now_ms).waiting_note())
        return False

    def deadline_reason(self, trace: TraceEntry, pt: ProcTrace, now_ms: int, hint: str) -> str:
        """What its polls tell (kineto_progress), with what to do."""
        discarded = kineto_leftovers.discard_unfinished_kineto_file(
            Path(pt.view.path)
        )  # a failed write or a refused start
        if discarded:
            return f"no complete trace file by the deadline{discarded}"
        return (
            self._kineto_progress(trace, pt, now_ms).deadline_reason()
            or f"no complete trace file by the deadline{hint}"
        )

    def removed(self, trace: TraceEntry, pt: ProcTrace, reason: str, uid: int, notes: FileNotes) -> None:
        """A process may finish its file and exit right after: done then; else failed at once (libkineto polls
        while the process lives: kineto_progress)."""
        if pt.view.state == TraceState.PENDING:
            why = f"{reason} before picking up the trace"
            self._t.set(trace, pt, TraceState.FAILED, why, reason=TraceReason.GONE_BEFORE_PICKUP)
        elif not self._kineto_file_check(trace, pt, notes, uid):
            why = f"{reason} before the trace finished{self._kineto_progress(trace, pt).exit_detail()}"
            self._t.set(trace, pt, TraceState.FAILED, why, reason=TraceReason.GONE_MID_TRACE)

    def outlives_registration(self, rec: RegisteredProcess) -> bool:
        return False  # its registration is its polls, which end with it

    def resume(self, trace: TraceEntry, pt: ProcTrace) -> str:
        return RESTARTED_KINETO


def _put_bounded(table: dict[tuple[str, int], V], key: tuple[str, int], value: V) -> None:
    """`table[key] = value`, first dropping the oldest entry when `table` holds _MAX_NOTES: entries of traces that
    never completed are never popped, and must not pile up."""
    if len(table) >= _MAX_NOTES:
        del table[next(iter(table))]
    table[key] = value

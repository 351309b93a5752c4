"""How the daemons' answers change a host's record in a cluster trace: StartTrace's and GetTrace's answers merged
into `HostRecord`s, and the ends a host can come to (finished, given up, no longer waited for).

Plain functions on the records; the caller (ClusterTrace) holds its lock around each call.
"""

from __future__ import annotations

import time

from dyno.client.trace.records import (
    FINAL_STATES,
    HOST_DONE,
    HOST_FAILED,
    HOST_NO_MATCH,
    HOST_TRACING,
    FetchFailure,
    HostRecord,
    ProcRecord,
    proc_record,
    state_name,
)
from dyno.v1 import dyno_pb2

__all__ = [
    "apply_attach",
    "apply_confirmed_start",
    "apply_start",
    "fail_host",
    "mark_finished",
    "may_report_after_restart",
    "merge_status",
    "stop_waiting",
    "unstarted_note",
    "with_waiting",
]

LOST_AFTER_RESTART = (
    "not reported by --timeout-s after the daemon was unreachable mid-trace (a daemon that restarted takes on only "
    "agent processes that report to it: not kineto ones, nor ones that exited before it was back)"
)
_MAY_STILL_RECORD = frozenset({"delivered", "running"})


def apply_start(h: HostRecord, resp: dyno_pb2.StartTraceResponse) -> None:
    """A host's StartTrace answer: the processes it triggered (and those busy in another trace), or why none."""
    h.hostname = resp.hostname
    h.message = resp.message
    h.matched_pids = list(resp.matched_pids)
    h.busy_pids = list(resp.busy_pids)
    h.registered_jobs = list(resp.registered_jobs)
    h.processes = [proc_record(p) for p in resp.triggered]
    h.processes += [
        ProcRecord(pid, state="busy", error="already being traced by another request") for pid in resp.busy_pids
    ]
    if not resp.triggered:
        h.state, h.error = HOST_NO_MATCH, resp.message or "no process matched"
        if resp.busy_pids:  # the daemon names the trace that holds them; `ps` shows each pid's (TRACING)
            pids = ",".join(str(p) for p in resp.busy_pids)
            h.error += f" (pids {pids}: `dyno-cli ps` shows the trace each is in; try again once it ends)"


def apply_confirmed_start(h: HostRecord, status: dyno_pb2.TraceStatus) -> None:
    """GetTrace found the trace on a host whose StartTrace answer came too late: it is followed like the others."""
    h.state, h.error, h.error_type = HOST_TRACING, "", ""
    h.hostname = status.hostname
    h.message = "started (confirmed by GetTrace: the StartTrace reply came after the deadline)"
    h.matched_pids = [p.pid for p in status.processes]
    h.processes = [proc_record(p) for p in status.processes]


def apply_attach(h: HostRecord, status: dyno_pb2.TraceStatus) -> None:
    """A host's GetTrace answer when attaching to a trace started earlier."""
    h.hostname = status.hostname
    h.message = "attached to a trace started earlier"
    h.matched_pids = [p.pid for p in status.processes]
    h.processes = [proc_record(p) for p in status.processes]
    if not status.processes:
        h.state, h.error = HOST_NO_MATCH, "the trace has no process on this host"


def merge_status(h: HostRecord, status: dyno_pb2.TraceStatus, reason: str, request: dyno_pb2.TraceRequest) -> None:
    """Merge a daemon's TraceStatus into `h`. `reason`: why we cancelled this host's trace ("" if we did not); it
    stays the error of its cancelled processes (the daemon only ever says "cancelled by request")."""
    by_pid = {p.pid: p for p in h.processes}
    h.hostname = status.hostname or h.hostname
    for p in status.processes:
        rec = by_pid.get(p.pid)
        new = rec is None
        if rec is None:
            rec = proc_record(p)
            h.processes.append(rec)
            by_pid[p.pid] = rec
        previous, rec.state = rec.state, state_name(p.state)
        rec.waiting = p.waiting
        if not (reason and rec.state == "cancelled"):
            rec.error = with_waiting(p.error, p.waiting, rec.state)
        elif new or previous != "cancelled":  # once, with what it was doing when we cancelled it
            # the daemon's waiting note (the agent's "no optimizer step for N s ...", dynod's account of a
            # libkineto iteration trace) says why it had not finished; a daemon without it: its state
            rec.error = reason + (f": {p.waiting}" if p.waiting else unstarted_note(previous, rec.protocol, request))
        rec.remote_path = p.path or rec.remote_path
        rec.size_bytes = p.size_bytes


def unstarted_note(state: str, protocol: str, request: dyno_pb2.TraceRequest) -> str:
    """Why a process we cancelled had not finished, from its state then, when its daemon gave no waiting note
    ("" when it may have begun: libkineto reports no start to an older daemon)."""
    if state == "pending":
        return ": the process had not picked the request up"
    if state == "running" and request.HasField("iterations"):
        # its agent sends a waiting note when it stops stepping: this one stepped as usual, only slower
        steps = request.iterations
        return f": it was recording and had not made its {steps} optimizer step(s) yet (a longer --timeout-s waits)"
    if state != "delivered" or protocol == "kineto":
        return ""
    if request.HasField("iterations"):
        return ": no optimizer step had started the trace (does the program call optimizer.step()?)"
    return ": the trace had not started yet"


def with_waiting(error: str, waiting: str, state: str) -> str:
    """A daemon's reason for a cancelled process, with what it was waiting for: dynod's cancel reason is only
    "cancelled by request", so the note says why (a later fetch or attach sees it too). Its other reasons (a
    timeout's, a libkineto exit's) say it already, in words of their own."""
    if not waiting or state != "cancelled":
        return error
    return f"{error} (it was waiting: {waiting})" if error else f"it was waiting: {waiting}"


def mark_finished(h: HostRecord, unreachable: bool) -> None:
    """The daemon says the trace finished: a process it never reported is lost (a daemon that forgot a process
    must not hang us). `unreachable`: the daemon was down or restarted mid-trace."""
    lost = LOST_AFTER_RESTART if unreachable else "the daemon finished the trace without reporting it"
    for p in h.processes:
        if p.state not in FINAL_STATES:
            p.state, p.error = "lost", lost
    h.state = HOST_DONE
    h.finished_ms = int(time.time() * 1000)


def may_report_after_restart(h: HostRecord) -> bool:
    """Whether a process of `h` may still report to its restarted daemon: an agent one that had picked the request
    up (delivered or running: it may be recording). Not a libkineto one, nor an agent one still pending (the agent
    cancels what is not recording when its stream ends). True while no process is known (an attach that saw none
    yet)."""
    if not h.processes:
        return True
    return any(p.state in _MAY_STILL_RECORD and p.protocol != "kineto" for p in h.processes)


def stop_waiting(h: HostRecord, wait_s: float) -> None:
    """An attached trace still running at wait_s: not ours to cancel. What is done was fetched; the rest is
    reported as still tracing (a later attach can fetch it)."""
    still = [p for p in h.processes if p.state not in FINAL_STATES]
    for p in still:
        p.error = "still tracing when the wait ended (--timeout-s); not cancelled: fetch it again later"
        if p.waiting:  # why it has not finished, as its daemon has it
            p.error += f" (it was waiting: {p.waiting})"
    h.state, h.error_type = HOST_FAILED, "Timeout"
    h.error = f"{len(still)} process(es) still tracing after {wait_s:g} s (--timeout-s); not cancelled"
    h.finished_ms = int(time.time() * 1000)


def fail_host(h: HostRecord, error: str, error_type: str, failure: FetchFailure) -> None:
    """Give a host up: its processes whose file did not arrive are lost, with `error` as the reason; a finished
    one's file is not fetched for `failure`."""
    h.state, h.error, h.error_type = HOST_FAILED, error, error_type
    h.finished_ms = int(time.time() * 1000)
    for p in h.processes:
        if p.ok or p.fetch == "failed" or p.state in FINAL_STATES - {"done"}:
            continue  # arrived, or already failed with its own reason
        if p.state == "done":
            p.fetch_failure = failure
        else:
            p.state = "lost"
        p.error = f"file not fetched: {error}"

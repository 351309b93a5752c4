"""Which local user may start, see, cancel and fetch which traces (the per-user rules, dyno.daemon.callers): an
admin touches every process, another identified local user only their own, an unidentified caller none. Plain: the
Dyno tracing RPCs (service.py) turn a refusal into PERMISSION_DENIED with its reason."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from dyno.daemon.callers import Caller
from dyno.daemon.tracing.values import FINAL_STATES, TraceView
from dyno.error_reasons import ErrorReason

__all__ = [
    "Denied",
    "cancel_denied",
    "fetch_denied",
    "fetch_of_unknown_denied",
    "unidentified_denied",
    "visible_view",
]


@dataclass(frozen=True)
class Denied:
    message: str
    reason: ErrorReason


def unidentified_denied(caller: Caller, what: str) -> Denied | None:
    """A caller who is no admin and whose user the daemon cannot tell may not `what` (e.g. "start traces")."""
    if caller.admin or caller.uid is not None:
        return None
    return Denied(
        f"cannot tell which local user calls, and only identified users may {what} without dynod's auth token: "
        "call from this host (dynod's Unix socket or loopback) or present the token or a client certificate",
        ErrorReason.CALLER_UNKNOWN,
    )


def visible_view(caller: Caller, view: TraceView) -> TraceView:
    """What `caller` sees of a trace (GetTrace, CancelTrace's answer): an admin all of it; anyone else only the
    processes it may touch (others' pids, jobs, paths and errors are left out), and `finished` once those are."""
    if caller.admin:
        return view
    mine = tuple(p for p in view.processes if caller.may_touch(p.uid))
    if len(mine) == len(view.processes):
        return view
    return replace(view, processes=mine, finished=all(p.state in FINAL_STATES for p in mine))


def cancel_denied(caller: Caller, view: TraceView) -> Denied | None:
    """Only the user of every process of a trace may cancel it."""
    others = [p.pid for p in view.processes if not caller.may_touch(p.uid)]
    if not others:
        return None
    return Denied(
        f"trace {view.trace_id!r} traces processes of other users (pid "
        f"{', '.join(map(str, others[:8]))}{'...' if len(others) > 8 else ''}): {caller.who()} may cancel "
        "only traces of its own processes",
        ErrorReason.NOT_YOUR_PROCESS,
    )


def fetch_denied(caller: Caller, view: TraceView | None, trace_id: str, pid: int) -> tuple[bool, Denied | None]:
    """(whether dynod knows the process's part in the trace, why the caller may not fetch its file): a known part
    only by the traced process's user; an unknown one is decided by the file's owner (fetch_of_unknown_denied)."""
    part = next((p for p in view.processes if p.pid == pid), None) if view is not None else None
    if part is None:
        return False, None
    if caller.may_touch(part.uid):
        return True, None
    return True, Denied(
        f"trace {trace_id!r} pid {pid} is another user's process: {caller.who()} may fetch only the trace "
        "files of its own processes",
        ErrorReason.NOT_YOUR_PROCESS,
    )


def fetch_of_unknown_denied(caller: Caller, path: Path, trace_id: str, pid: int) -> Denied | None:
    """A trace dynod no longer knows (restarted before it finished): its file is the process's user's."""
    try:
        if caller.may_touch(os.lstat(path).st_uid):
            return None
    except OSError:
        pass
    return Denied(
        f"trace {trace_id!r} pid {pid}: its file is not {caller.who()}'s: {caller.who()} may "
        "fetch only the trace files of its own processes",
        ErrorReason.NOT_YOUR_PROCESS,
    )

"""The per-user rules of the tracing RPCs (daemon/tracing/access.py): who may start, see, cancel and fetch which
traces."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dyno.daemon.callers import ADMIN, Caller
from dyno.daemon.tracing.access import (
    cancel_denied,
    fetch_denied,
    fetch_of_unknown_denied,
    unidentified_denied,
    visible_view,
)
from dyno.daemon.tracing.values import ProcessTraceView, TraceSpec, TraceState, TraceView
from dyno.error_reasons import ErrorReason

pytestmark = pytest.mark.unit

ALICE = Caller(uid=1001, admin=False, how="unix socket")
NOBODY = Caller(uid=None, admin=False, how="tcp")


def _view(*uids: int, states: tuple[TraceState, ...] = ()) -> TraceView:
    procs = tuple(
        ProcessTraceView(
            100 + i, "j", None, "agent", (states or (TraceState.RUNNING,) * len(uids))[i], f"/t/{i}", uid=uid
        )
        for i, uid in enumerate(uids)
    )
    return TraceView("t1", TraceSpec(job_id="j"), procs, False, 0)


def test_a_user_sees_only_its_own_processes_of_a_trace_an_admin_all() -> None:
    view = _view(1001, 1002, -1, 1001)
    assert [p.pid for p in visible_view(ALICE, view).processes] == [100, 103]
    assert visible_view(ADMIN, view) is view
    assert visible_view(NOBODY, view).processes == ()  # an unidentified caller: none
    # finished once the processes it sees are (the others' states are not its to know)
    mixed = _view(1001, 1002, states=(TraceState.DONE, TraceState.RUNNING))
    assert visible_view(ALICE, mixed).finished and not visible_view(ADMIN, mixed).finished
    assert not visible_view(ALICE, _view(1001, 1002)).finished


def test_an_unidentified_caller_may_do_nothing_an_admin_everything() -> None:
    denied = unidentified_denied(NOBODY, "cancel traces")
    assert denied is not None and denied.reason == ErrorReason.CALLER_UNKNOWN
    assert "only identified users may cancel traces" in denied.message
    assert unidentified_denied(ALICE, "cancel traces") is None
    assert unidentified_denied(ADMIN, "cancel traces") is None


def test_a_trace_is_cancelled_only_by_the_user_of_all_its_processes() -> None:
    assert cancel_denied(ALICE, _view(1001, 1001)) is None
    denied = cancel_denied(ALICE, _view(1001, 1002))
    assert denied is not None and denied.reason == ErrorReason.NOT_YOUR_PROCESS
    assert denied.message.startswith("trace 't1' traces processes of other users (pid 101)")
    assert cancel_denied(ADMIN, _view(1002)) is None


def test_a_known_part_is_fetched_by_its_user_an_unknown_one_by_the_files_owner(tmp_path: Path) -> None:
    assert fetch_denied(ALICE, _view(1001), "t1", 100) == (True, None)
    known, denied = fetch_denied(ALICE, _view(1002), "t1", 100)
    assert known and denied is not None and "is another user's process" in denied.message
    assert fetch_denied(ALICE, _view(1001), "t1", 999) == (False, None)  # not part of it: the file decides
    assert fetch_denied(ALICE, None, "t1", 100) == (False, None)
    f = tmp_path / "f"
    f.write_bytes(b"x")
    me = Caller(uid=os.getuid(), admin=False, how="unix socket")
    assert fetch_of_unknown_denied(me, f, "t1", 100) is None
    other = fetch_of_unknown_denied(Caller(uid=os.getuid() + 1, admin=False, how="unix socket"), f, "t1", 100)
    assert other is not None and other.reason == ErrorReason.NOT_YOUR_PROCESS
    assert fetch_of_unknown_denied(me, tmp_path / "missing", "t1", 100) is not None

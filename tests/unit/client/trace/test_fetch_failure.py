"""The typed reason a finished process's file did not arrive (records.FetchFailure): read from a failed call's
ErrorInfo reason, else its status code, never from its message; carried by host give-ups; written to the
manifest as a plain string."""

from __future__ import annotations

import json

import pytest

from dyno.client.errors import (
    DeadlineExceeded,
    DynoError,
    Internal,
    NotFound,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)
from dyno.client.hosts import Host
from dyno.client.trace.answers import fail_host
from dyno.client.trace.records import FetchFailure, HostRecord, ProcRecord, fetch_failure_of
from dyno.error_reasons import ErrorReason

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (Unauthenticated("bad token"), FetchFailure.UNAUTHENTICATED),
        (PermissionDenied("no", reason=ErrorReason.NOT_YOUR_PROCESS.value), FetchFailure.PERMISSION_DENIED),
        (PermissionDenied("no", reason=ErrorReason.CALLER_UNKNOWN.value), FetchFailure.PERMISSION_DENIED),
        (NotFound("gone", reason=ErrorReason.NO_TRACE_FILE.value), FetchFailure.NOT_FOUND),
        (NotFound("gone"), FetchFailure.NOT_FOUND),
        (Unavailable("down"), FetchFailure.UNREACHABLE),
        (Unavailable("stopping", reason=ErrorReason.SHUTTING_DOWN.value), FetchFailure.UNREACHABLE),
        (DeadlineExceeded("slow"), FetchFailure.TIMED_OUT),
        (Internal("oops"), FetchFailure.DAEMON_ERROR),
        (DynoError("checksum mismatch"), FetchFailure.DAEMON_ERROR),
    ],
)
def test_failure_of_a_daemon_error(error: DynoError, expected: FetchFailure) -> None:
    assert fetch_failure_of(error) is expected


def test_the_reason_wins_over_the_wording_and_the_class() -> None:
    # a message that reads like another failure, and a generic class: the ErrorInfo reason decides
    e = DynoError("not authenticated: the file is gone", reason=ErrorReason.TRACE_NOT_FOUND.value)
    assert fetch_failure_of(e) is FetchFailure.NOT_FOUND
    assert fetch_failure_of(DynoError("not authenticated")) is FetchFailure.DAEMON_ERROR


def test_a_given_up_host_types_only_its_finished_unfetched_files() -> None:
    h = HostRecord(Host("gpu1"), "gpu1_1778")
    done, running = ProcRecord(pid=1, state="done"), ProcRecord(pid=2, state="running")
    fetched = ProcRecord(pid=3, state="done", fetch="fetched")
    h.processes = [done, running, fetched]
    fail_host(h, "not authenticated: token rotated", "Unauthenticated", FetchFailure.UNAUTHENTICATED)
    assert done.fetch_failure is FetchFailure.UNAUTHENTICATED and done.state == "done"
    assert running.fetch_failure is FetchFailure.NONE and running.state == "lost"
    assert fetched.fetch_failure is FetchFailure.NONE


def test_the_manifest_key_is_a_plain_string() -> None:
    d = ProcRecord(pid=1, state="done", fetch="failed", fetch_failure=FetchFailure.LOCAL_WRITE).to_dict()
    assert json.loads(json.dumps(d))["fetch_failure"] == "local_write"
    assert type(d["fetch_failure"]) is str
    assert ProcRecord(pid=2).to_dict()["fetch_failure"] == ""

"""The records of a cluster trace (dyno.client.trace.records): the exit code they make, and a host's folder name."""

from __future__ import annotations

import pytest
from host_records import fetched_proc, host_record

from dyno.client.hosts import Host
from dyno.client.trace.records import ProcRecord, host_dir_name, trace_exit_code

pytestmark = pytest.mark.unit


def test_exit_codes() -> None:
    assert trace_exit_code([host_record("a", "done", fetched_proc(1)), host_record("b", "done", fetched_proc(2))]) == 0
    assert trace_exit_code([host_record("a", "done", fetched_proc(1)), host_record("b", "failed", error="x")]) == 3
    assert trace_exit_code([host_record("a", "done", fetched_proc(1)), host_record("b", "no_match", error="none")]) == 3
    failed = ProcRecord(2, state="failed", error="boom")
    assert trace_exit_code([host_record("a", "done", fetched_proc(1), failed)]) == 3
    assert trace_exit_code([host_record("a", "done", failed)]) == 1
    assert host_dir_name(Host("::1", 1778)) == "__1_1778"

"""The progress totals add up: a process that finished tracing but whose file failed to arrive (a full disk) counts
as failed, not as done *and* failed. Before: "processes: 2 matched, 0 running, 2 done, 1 failed"."""

from __future__ import annotations

import pytest

from dyno.client.hosts import Host
from dyno.client.trace.progress import counts, total_line
from dyno.client.trace.records import HostRecord, ProcRecord

pytestmark = pytest.mark.unit


def test_a_done_process_whose_fetch_failed_counts_once() -> None:
    h = HostRecord(Host("gpu1", 1778), "gpu1_1778", state="done", matched_pids=[1, 2])
    h.processes = [
        ProcRecord(pid=1, state="done", fetch="fetched", fetched_bytes=10),
        ProcRecord(pid=2, state="done", fetch="failed", error="No space left on device"),
    ]
    c = counts(h)
    assert (c.matched, c.running, c.done, c.failed, c.fetched) == (2, 0, 1, 1, 1)
    assert "processes: 2 matched, 0 running, 1 done, 1 failed" in total_line([h])

"""A trace cancelled by dyno-cli trace itself (its --timeout-s ran out) says so, beyond the daemon's generic
"cancelled by request"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from until_cancelled_fake import RunsUntilCancelled

from dyno.client.cluster import Cluster
from dyno.client.hosts import Host
from dyno.client.trace.cluster import ClusterTrace
from dyno.daemon.fake_server import serve
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def _host(state: int) -> Iterator[Host]:
    fake = serve(lambda _port: RunsUntilCancelled(state))
    yield Host("127.0.0.1", fake.port)
    fake.server.stop(0)


@pytest.fixture
def host() -> Iterator[Host]:
    yield from _host(dyno_pb2.TRACE_STATE_RUNNING)


@pytest.fixture
def waiting_host() -> Iterator[Host]:
    """Its agents got the request but never started: an iteration trace of a program that does not step."""
    yield from _host(dyno_pb2.TRACE_STATE_DELIVERED)


def _errors_after_timeout(host: Host, request: dyno_pb2.TraceRequest, out: Path) -> set[str]:
    with Cluster([host], deadline_s=2) as cluster:
        ct = ClusterTrace(cluster, request, out, wait_s=0.2, poll_s=0.05)
        ct.start()
        ct.follow()
        assert ct.wait(10)
    (h,) = ct.snapshot()
    assert {p.state for p in h.processes} == {"cancelled"}
    return {p.error for p in h.processes}


def test_a_timeout_cancel_says_it_was_the_timeout(host: Host, tmp_path: Path) -> None:
    request = dyno_pb2.TraceRequest(job_id="job1", trace_id="t-timeout", duration_ms=60_000)
    assert _errors_after_timeout(host, request, tmp_path) == {"cancelled by dyno-cli (--timeout-s)"}


def test_a_timeout_cancel_of_an_iteration_trace_that_never_started_says_why(waiting_host: Host, tmp_path: Path) -> None:
    # The CLI's default wait (300 s) ends before the daemon's iteration deadline, so its cancel is all a user
    # sees of a program that never calls optimizer.step(): it must name that, not just the timeout.
    request = dyno_pb2.TraceRequest(job_id="job1", trace_id="t-nostep", iterations=3)
    assert _errors_after_timeout(waiting_host, request, tmp_path) == {
        "cancelled by dyno-cli (--timeout-s): no optimizer step had started the trace (does the program call "
        "optimizer.step()?)"
    }

"""dyno-cli trace's default synchronized start: short for agent-only jobs, kineto's poll otherwise."""

from __future__ import annotations

import pytest

from dyno.client.cluster import HostResult
from dyno.client.commands.trace import AGENT_START_DELAY_S, DEFAULT_START_DELAY_S, _default_start_delay
from dyno.client.hosts import Host
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


class _Cluster:
    def __init__(self, results):
        self.results = results
        self.asked = []

    def list_processes(self, job_id):
        self.asked.append(job_id)
        return self.results


def _ok(*protocols):
    resp = dyno_pb2.ListProcessesResponse(
        processes=[dyno_pb2.ProcessInfo(pid=100 + i, protocol=p) for i, p in enumerate(protocols)]
    )
    return HostResult(Host("a"), True, resp)


def test_agent_only_job_starts_soon():
    c = _Cluster([_ok(dyno_pb2.PROTOCOL_AGENT), _ok(dyno_pb2.PROTOCOL_AGENT, dyno_pb2.PROTOCOL_AGENT)])
    assert _default_start_delay(c, "J") == AGENT_START_DELAY_S and c.asked == ["J"]


def test_any_kineto_process_or_silent_host_waits_for_the_poll():
    assert _default_start_delay(_Cluster([_ok(dyno_pb2.PROTOCOL_AGENT), _ok(dyno_pb2.PROTOCOL_KINETO)]), "J") == (
        DEFAULT_START_DELAY_S
    )
    down = HostResult(Host("b"), False, None, "cannot reach dynod", "Unavailable")
    assert _default_start_delay(_Cluster([_ok(dyno_pb2.PROTOCOL_AGENT), down]), "J") == DEFAULT_START_DELAY_S

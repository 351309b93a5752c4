"""`dyno-cli ps --job-id J` with no process of J: the line must name the job, not claim nothing is registered."""

from __future__ import annotations

import pytest

from dyno.client.cluster import HostResult
from dyno.client.commands.ps import render
from dyno.client.hosts import Host
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def test_empty_answer_for_a_job_names_the_job() -> None:
    answered = HostResult(Host("gpu1"), True, value=dyno_pb2.ListProcessesResponse(hostname="gpu1"))
    assert render([answered], job_id="nope") == "no process of job 'nope' registered on 1 host(s)"
    assert render([answered]) == "no processes registered on 1 host(s)"

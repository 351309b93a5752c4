"""`dyno-cli trace` adds the how-to-register hint only when the daemons that answered had no process at all: not
when the job id was wrong (they name the jobs they have), nor when the job's processes were busy or matched."""

from __future__ import annotations

import pytest

from dyno.client.commands.trace import nothing_registered
from dyno.client.hosts import Host
from dyno.client.trace.records import HOST_FAILED, HOST_NO_MATCH, HostRecord

pytestmark = pytest.mark.unit


def _host(name: str, state: str = HOST_NO_MATCH, **kw: list) -> HostRecord:
    return HostRecord(Host(name), f"{name}_1778", state=state, **kw)


def test_empty_daemons_get_the_hint_even_beside_an_unreachable_one() -> None:
    assert nothing_registered([_host("gpu1")])
    assert nothing_registered([_host("gpu1"), _host("gpu2", HOST_FAILED)])


def test_no_hint_when_another_job_busy_or_matched_processes_were_there() -> None:
    assert not nothing_registered([_host("gpu1"), _host("gpu2", registered_jobs=["exp9"])])
    assert not nothing_registered([_host("gpu1", busy_pids=[42])])
    assert not nothing_registered([_host("gpu1", matched_pids=[42])])


def test_no_hint_when_no_host_answered() -> None:
    assert not nothing_registered([_host("gpu1", HOST_FAILED)])
    assert not nothing_registered([])

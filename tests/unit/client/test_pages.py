"""The daemon's paged answers gathered into one: every page asked for once, and a daemon whose page tokens come
round again stops the gathering with PagesNotEnding instead of asking for ever."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dyno.client import pages
from dyno.client.errors import DynoError
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def _daemon(make: Callable[[str, int], Any], tokens: list[str]) -> tuple[Callable[[Any], Any], list[str]]:
    """A call answering page i with `make(token_i, i)`, token_i = tokens[i] (the last one past the end); the page
    tokens it was asked with, in order."""
    asked: list[str] = []

    def call(request: Any) -> Any:
        asked.append(request.page_token)
        i = len(asked) - 1
        if i > 50:
            raise AssertionError("asked for more than 50 pages")
        return make(tokens[min(i, len(tokens) - 1)], i)

    return call, asked


def _processes(token: str, i: int) -> dyno_pb2.ListProcessesResponse:
    return dyno_pb2.ListProcessesResponse(processes=[dyno_pb2.ProcessInfo(pid=100 + i)], next_page_token=token)


def _jobs(token: str, i: int) -> dyno_pb2.ListJobsResponse:
    return dyno_pb2.ListJobsResponse(jobs=[dyno_pb2.JobRecord(job_id=f"j{i}")], next_page_token=token)


def _trace(token: str, i: int) -> dyno_pb2.TraceStatus:
    return dyno_pb2.TraceStatus(trace_id="t", processes=[dyno_pb2.ProcessTrace(pid=100 + i)], next_page_token=token)


def _metrics(token: str, i: int) -> dyno_pb2.GetMetricsResponse:
    return dyno_pb2.GetMetricsResponse(samples=[dyno_pb2.Sample(timestamp_ms=1000 + i)], next_page_token=token)


def _gather(kind: str, call: Callable[[Any], Any]) -> list[int]:
    """The pids, job numbers or sample times of the whole answer."""
    if kind == "processes":
        return [p.pid for p in pages.gather_processes(call, "").processes]
    if kind == "jobs":
        return [int(j.job_id[1:]) for p in pages.job_pages(call, dyno_pb2.ListJobsRequest()) for j in p.jobs]
    if kind == "trace":
        return [p.pid for p in pages.rest_of_trace(call, call(dyno_pb2.GetTraceRequest(trace_id="t"))).processes]
    return [s.timestamp_ms for s in pages.gather_metrics(call, [], 0, 0, 1 << 20, "h").samples]


_MAKERS = {"processes": _processes, "jobs": _jobs, "trace": _trace, "metrics": _metrics}
_FIRST = {"processes": 100, "jobs": 0, "trace": 100, "metrics": 1000}


@pytest.mark.parametrize("kind", list(_MAKERS))
def test_every_page_is_asked_for_once_in_order(kind: str) -> None:
    call, asked = _daemon(_MAKERS[kind], ["a", "b", "c", ""])
    first = _FIRST[kind]
    assert _gather(kind, call) == [first, first + 1, first + 2, first + 3]
    assert asked == ["", "a", "b", "c"]


@pytest.mark.parametrize("kind", list(_MAKERS))
@pytest.mark.parametrize(
    ("tokens", "sent"),
    [(["a"], ["", "a"]), (["a", "b", "a"], ["", "a", "b"])],
    ids=["the same token", "a token come round"],
)
def test_a_token_given_twice_ends_the_gathering(kind: str, tokens: list[str], sent: list[str]) -> None:
    call, asked = _daemon(_MAKERS[kind], tokens)
    with pytest.raises(pages.PagesNotEnding) as stopped:
        _gather(kind, call)
    assert isinstance(stopped.value, DynoError)  # a failed host to Cluster, one line to dyno-cli
    assert "'a' twice" in str(stopped.value)
    assert asked == sent  # the token that came again is never sent

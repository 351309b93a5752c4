"""The daemon's paged answers gathered into one, for DynoClient: GetMetrics, ListProcesses, ListJobs and GetTrace
(StartTrace and CancelTrace answer their first page and continue in GetTrace pages).

Each function takes the unary call of its RPC (DynoClient.call on the stub's method: deadline, retries, error
translation), so the paging stays apart from the channel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import grpc

from dyno.client.errors import Internal, ResourceExhausted
from dyno.v1 import dyno_pb2

__all__ = [
    "PagesNotEnding",
    "gather_jobs",
    "gather_metrics",
    "gather_processes",
    "job_pages",
    "rest_of_trace",
    "trace_pages",
]

GetTraceCall = Callable[[dyno_pb2.GetTraceRequest], dyno_pb2.TraceStatus]


class PagesNotEnding(Internal):
    """A daemon handed out a page token it had already given in this answer: asked on, it would answer the same
    pages forever (a daemon's tokens name positions, each past the last)."""


class _Tokens:
    """The page tokens of one answer, each let through once."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def next(self, token: str) -> str:
        """`token` ("" at the last page), or PagesNotEnding when it came before."""
        if token in self._seen:
            raise PagesNotEnding(f"the daemon's pages do not end: it gave the page token {token[:64]!r} twice")
        if token:
            self._seen.add(token)
        return token


def gather_metrics(
    call: Callable[[dyno_pb2.GetMetricsRequest], dyno_pb2.GetMetricsResponse],
    names: Sequence[str],
    since_ms: int,
    limit: int,
    max_bytes: int,
    target: str,
) -> dyno_pb2.GetMetricsResponse:
    """GetMetrics' pages as one answer of at most `max_bytes` (see DynoClient.metrics); a sample split over two
    pages is joined again. Over `max_bytes`: ResourceExhausted naming `target` and about how many samples fit."""
    request = dyno_pb2.GetMetricsRequest(
        names=list(names), since_ms=since_ms, limit=limit, whole_history=not (since_ms or limit)
    )
    answer = call(request)
    size = answer.ByteSize()
    tokens = _Tokens()
    while tokens.next(answer.next_page_token):
        request = dyno_pb2.GetMetricsRequest(names=list(names), page_token=answer.next_page_token)
        page = call(request)
        size += page.ByteSize()
        if size > max_bytes:
            per_sample = size / max(1, len(answer.samples) + len(page.samples))
            raise ResourceExhausted(
                f"the samples asked for are more than {max_bytes >> 20} MiB (about the newest "
                f"{int(max_bytes / per_sample)} fit): ask for fewer (limit, a later since_ms, or names)",
                target,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
            )
        samples = list(page.samples)
        if samples and answer.samples and samples[0].timestamp_ms == answer.samples[-1].timestamp_ms:
            answer.samples[-1].metrics.extend(samples.pop(0).metrics)  # the rest of a sample split over pages
        answer.samples.extend(samples)
        answer.next_page_token = page.next_page_token
    return answer


def gather_processes(
    call: Callable[[dyno_pb2.ListProcessesRequest], dyno_pb2.ListProcessesResponse], job_id: str
) -> dyno_pb2.ListProcessesResponse:
    """ListProcesses' pages (of `job_id`, "" for all) as one answer."""
    answer = call(dyno_pb2.ListProcessesRequest(job_id=job_id))
    tokens = _Tokens()
    while tokens.next(answer.next_page_token):
        page = call(dyno_pb2.ListProcessesRequest(job_id=job_id, page_token=answer.next_page_token))
        answer.processes.extend(page.processes)
        answer.next_page_token = page.next_page_token
    return answer


def gather_jobs(
    call: Callable[[dyno_pb2.ListJobsRequest], dyno_pb2.ListJobsResponse], request: dyno_pb2.ListJobsRequest
) -> dyno_pb2.ListJobsResponse:
    """ListJobs' pages as one answer; every page is asked with `request`'s filters."""
    answer, *rest = job_pages(call, request)
    for page in rest:
        answer.jobs.extend(page.jobs)
    answer.next_page_token = ""
    return answer


def job_pages(
    call: Callable[[dyno_pb2.ListJobsRequest], dyno_pb2.ListJobsResponse], request: dyno_pb2.ListJobsRequest
) -> list[dyno_pb2.ListJobsResponse]:
    """ListJobs' pages as answered, each asked with `request`'s filters (a columnar page's columns are its own:
    pages of columns are not merged into one). Asked for `analysis_rules`, a daemon that answers columns without
    `analyses` (one older than that field) is asked again for records, whose analyses are whole. Raises
    column_pages.MalformedPage (a DynoError: the host failed) at a page whose columns do not agree."""
    answers = [call(request)]
    first = answers[0]
    if request.analysis_rules and first.HasField("columns") and not first.columns.HasField("analyses"):
        records = dyno_pb2.ListJobsRequest()
        records.CopyFrom(request)  # the same filters; records in pages of the default size
        records.columnar = records.analysis_rules = False
        records.page_size = 0
        request = records
        answers = [call(request)]
    _check(answers[0], request.analysis_rules)
    tokens = _Tokens()
    while tokens.next(answers[-1].next_page_token):
        follow = dyno_pb2.ListJobsRequest()
        follow.CopyFrom(request)
        follow.page_token = answers[-1].next_page_token
        answers.append(call(follow))
        _check(answers[-1], request.analysis_rules)
    return answers


def _check(page: dyno_pb2.ListJobsResponse, analyses: bool) -> None:
    """column_pages.check_page of a columnar page (a page of records needs none: numpy is not loaded for it)."""
    if page.HasField("columns"):
        from dyno.client.column_pages import check_page

        check_page(page, analyses=analyses)


def rest_of_trace(call: GetTraceCall, answer: dyno_pb2.TraceStatus) -> dyno_pb2.TraceStatus:
    """`answer` (GetTrace's or CancelTrace's first page) with the processes of the pages after it; no token left."""
    if answer.next_page_token:
        answer.processes.extend(trace_pages(call, answer.trace_id, answer.next_page_token))
        answer.next_page_token = ""
    return answer


def trace_pages(call: GetTraceCall, trace_id: str, page_token: str) -> list[dyno_pb2.ProcessTrace]:
    """The processes of the GetTrace pages from `page_token` on."""
    out: list[dyno_pb2.ProcessTrace] = []
    tokens = _Tokens()
    while tokens.next(page_token):
        page = call(dyno_pb2.GetTraceRequest(trace_id=trace_id, page_token=page_token))
        out.extend(page.processes)
        page_token = page.next_page_token
    return out

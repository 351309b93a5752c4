"""ListJobs: request checks, page tokens and proto conversion over JobAccounting.list (no logic of its own)."""

from __future__ import annotations

from collections.abc import Callable

import grpc

from dyno.daemon.jobs.accounting import JobAccounting
from dyno.daemon.jobs.attribution import MAX_JOB_ID_LEN
from dyno.daemon.jobs.store import JobQuery
from dyno.daemon.rpc_abort import abort
from dyno.v1 import dyno_pb2

__all__ = ["DEFAULT_PAGE_SIZE", "MAX_PAGE_SIZE", "ListJobsRpc"]

DEFAULT_PAGE_SIZE = 500
MAX_PAGE_SIZE = 1000
_TOKEN_PREFIX = "j1:"
_MAX_USER_LEN = 256


class ListJobsRpc:
    def __init__(self, accounting: Callable[[], JobAccounting | None], hostname: str) -> None:
        self._accounting = accounting
        self._hostname = hostname

    def __call__(self, request: dyno_pb2.ListJobsRequest, context: grpc.ServicerContext) -> dyno_pb2.ListJobsResponse:
        acc = self._accounting()
        if acc is None:
            abort(context, grpc.StatusCode.UNIMPLEMENTED, "ListJobs: job accounting is off in this daemon")
        if request.since_ms < 0 or request.until_ms < 0:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, "since_ms, until_ms: must be >= 0 (unix ms)")
        if not 0 <= request.page_size <= MAX_PAGE_SIZE:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"page_size: must be 0-{MAX_PAGE_SIZE}")
        if len(request.job_id) > MAX_JOB_ID_LEN:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"job_id: at most {MAX_JOB_ID_LEN} characters")
        if len(request.user) > _MAX_USER_LEN:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"user: at most {_MAX_USER_LEN} characters")
        after = 0
        if request.page_token:
            digits = request.page_token.removeprefix(_TOKEN_PREFIX)
            valid = digits.isascii() and digits.isdigit() and len(digits) <= 19 and int(digits) < 2**63
            if not request.page_token.startswith(_TOKEN_PREFIX) or not valid:
                abort(context, grpc.StatusCode.INVALID_ARGUMENT, "page_token: not a next_page_token of ListJobs")
            after = int(digits)
        q = JobQuery(request.since_ms, request.until_ms, request.job_id, request.user, request.running_only)
        records, next_after = acc.list_protos(q, after, request.page_size or DEFAULT_PAGE_SIZE)
        return dyno_pb2.ListJobsResponse(
            hostname=self._hostname,
            jobs=records,
            next_page_token=f"{_TOKEN_PREFIX}{next_after}" if next_after else "",
            store_problem=acc.problem(),
        )

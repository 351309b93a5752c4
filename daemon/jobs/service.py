"""ListJobs: request checks, the per-user rules (dyno.daemon.callers), page tokens and proto conversion over
JobAccounting.list (no logic of its own).

An admin sees every job's records; another identified local user only the records whose `user` is theirs (the
login name job attribution gives a process's owner, its uid's number when it has none); an unidentified caller is
refused as the tracing RPCs refuse it (PERMISSION_DENIED, CALLER_UNKNOWN)."""

from __future__ import annotations

from collections.abc import Callable

import grpc

from dyno import job_columns
from dyno.daemon.callers import ADMIN, Caller
from dyno.daemon.jobs.accounting import JobAccounting
from dyno.daemon.jobs.attribution import MAX_JOB_ID_LEN, user_name
from dyno.daemon.jobs.store import JobQuery
from dyno.daemon.jobs.wire import list_jobs_response
from dyno.daemon.rpc_abort import abort
from dyno.daemon.tracing.access import unidentified_denied
from dyno.v1 import dyno_pb2

__all__ = ["DEFAULT_PAGE_SIZE", "MAX_PAGE_SIZE", "ListJobsRpc", "columnar_response"]

DEFAULT_PAGE_SIZE = 500
MAX_PAGE_SIZE = 1000  # a columnar page's: job_columns.MAX_ROWS, its default too
_TOKEN_PREFIX = "j1:"
_MAX_USER_LEN = 256


class ListJobsRpc:
    def __init__(
        self,
        accounting: Callable[[], JobAccounting | None],
        hostname: str,
        caller_of: Callable[[grpc.ServicerContext], Caller] | None = None,
        name_of: Callable[[int], str] = user_name,
    ) -> None:
        self._accounting = accounting
        self._hostname = hostname
        self._caller_of = caller_of or (lambda context: ADMIN)
        self._name_of = name_of  # uid -> the `user` job attribution writes in records (dyno.daemon.jobs.attribution)

    def __call__(self, request: dyno_pb2.ListJobsRequest, context: grpc.ServicerContext) -> dyno_pb2.ListJobsResponse:
        return dyno_pb2.ListJobsResponse.FromString(self.encoded(request, context))

    def encoded(self, request: dyno_pb2.ListJobsRequest, context: grpc.ServicerContext) -> bytes:
        """The answer as the encoded ListJobsResponse, joined from the stored records' encodings (jobs/wire.py),
        which dyno.daemon.server.add_to_server sends as it is."""
        acc = self._accounting()
        if acc is None:
            abort(context, grpc.StatusCode.UNIMPLEMENTED, "ListJobs: job accounting is off in this daemon")
        if request.since_ms < 0 or request.until_ms < 0:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, "since_ms, until_ms: must be >= 0 (unix ms)")
        most = job_columns.MAX_ROWS if request.columnar else MAX_PAGE_SIZE
        if not 0 <= request.page_size <= most:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"page_size: must be 0-{most}")
        if len(request.job_id) > MAX_JOB_ID_LEN:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"job_id: at most {MAX_JOB_ID_LEN} characters")
        if len(request.user) > _MAX_USER_LEN:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"user: at most {_MAX_USER_LEN} characters")
        user = self._user_filter(request.user, context)
        after = 0
        if request.page_token:
            digits = request.page_token.removeprefix(_TOKEN_PREFIX)
            valid = digits.isascii() and digits.isdigit() and len(digits) <= 19 and int(digits) < 2**63
            if not request.page_token.startswith(_TOKEN_PREFIX) or not valid:
                abort(context, grpc.StatusCode.INVALID_ARGUMENT, "page_token: not a next_page_token of ListJobs")
            after = int(digits)
        records: list[bytes] = []
        next_after = 0
        if user is not None:  # None: a local user asking for another user's jobs; none of them are theirs to see
            q = JobQuery(request.since_ms, request.until_ms, request.job_id, user, request.running_only)
            default = job_columns.MAX_ROWS if request.columnar else DEFAULT_PAGE_SIZE
            records, next_after = acc.list_encoded(q, after, request.page_size or default)
        token = f"{_TOKEN_PREFIX}{next_after}" if next_after else ""
        if request.columnar:
            return columnar_response(
                self._hostname, records, token, acc.problem(), analysis_rules=request.analysis_rules
            )
        return list_jobs_response(self._hostname, records, token, acc.problem())

    def _user_filter(self, asked: str, context: grpc.ServicerContext) -> str | None:
        """The `user` filter the caller may have: an admin's as asked; another local user's own name (None: they
        asked for someone else's). An unidentified caller is refused."""
        caller = self._caller_of(context)
        denied = unidentified_denied(caller, "list jobs")
        if denied is not None:
            abort(context, grpc.StatusCode.PERMISSION_DENIED, denied.message, denied.reason)
        if caller.admin or caller.uid is None:  # (not admin and no uid: refused above)
            return asked
        own = self._name_of(caller.uid)
        return own if asked in ("", own) else None


def columnar_response(
    hostname: str, records: list[bytes], next_page_token: str, store_problem: str, *, analysis_rules: bool = False
) -> bytes:
    """The encoded ListJobsResponse of a columnar request: the page's encoded records (in id order) as JobColumns
    (with `analysis_rules`, their analyses' rules too).
    Past job_columns' bounds (`fitting`) the page ends at the last stored record that fits (the next page goes on
    after its id). Records without an id (running ones not stored yet, or every record when the database cannot be
    used) are never cut: a page with none stored that fits holds them all, with no token."""
    jobs = dyno_pb2.ListJobsResponse.FromString(list_jobs_response("", records, "", "")).jobs
    took = job_columns.fitting(jobs, analysis_rules=analysis_rules)
    rows = jobs
    if took < len(jobs):
        cut = next((k for k in range(took, 0, -1) if jobs[k - 1].record_id), 0)
        if cut:
            rows = jobs[:cut]
            next_page_token = f"{_TOKEN_PREFIX}{jobs[cut - 1].record_id}"
    columns = job_columns.job_columns(rows, analysis_rules=analysis_rules)
    answer = dyno_pb2.ListJobsResponse(
        hostname=hostname, next_page_token=next_page_token, store_problem=store_problem, columns=columns
    )
    answer.columns.SetInParent()  # an empty page is columnar too
    return answer.SerializeToString()

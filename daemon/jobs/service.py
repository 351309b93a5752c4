"""ListJobs: request checks, the per-user rules (dyno.daemon.callers), page tokens and proto conversion over
JobAccounting.list (no logic of its own).

An admin sees every job's records; another identified local user only the records whose `user` is theirs (the
login name job attribution gives a process's owner, its uid's number when it has none); an unidentified caller is
refused as the tracing RPCs refuse it (PERMISSION_DENIED, CALLER_UNKNOWN)."""

from __future__ import annotations

from collections.abc import Callable

import grpc

from dyno.daemon.callers import ADMIN, Caller
from dyno.daemon.jobs.accounting import JobAccounting
from dyno.daemon.jobs.attribution import MAX_JOB_ID_LEN, user_name
from dyno.daemon.jobs.store import JobQuery
from dyno.daemon.jobs.wire import list_jobs_response
from dyno.daemon.rpc_abort import abort
from dyno.daemon.tracing.access import unidentified_denied
from dyno.v1 import dyno_pb2

__all__ = ["DEFAULT_PAGE_SIZE", "MAX_PAGE_SIZE", "ListJobsRpc"]

DEFAULT_PAGE_SIZE = 500
MAX_PAGE_SIZE = 1000
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
        if not 0 <= request.page_size <= MAX_PAGE_SIZE:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"page_size: must be 0-{MAX_PAGE_SIZE}")
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
        if user is None:  # a local user asking for another user's jobs: none of them are theirs to see
            return list_jobs_response(self._hostname, (), "", acc.problem())
        q = JobQuery(request.since_ms, request.until_ms, request.job_id, user, request.running_only)
        records, next_after = acc.list_encoded(q, after, request.page_size or DEFAULT_PAGE_SIZE)
        token = f"{_TOKEN_PREFIX}{next_after}" if next_after else ""
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

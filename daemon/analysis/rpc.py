"""GetTraceSummary: request checks, the per-user rules and proto conversion over Analyses (no logic of its own).

An admin sees every trace's summary; another identified local user only those of traces of their own processes
(a stored summary: its `user` is theirs, as ListJobs decides); an unidentified caller is refused (CALLER_UNKNOWN).
A trace this host does not know is NOT_FOUND with the trace manager's reason (TRACE_NOT_FOUND, TRACE_FORGOTTEN)."""

from __future__ import annotations

from collections.abc import Callable

import grpc

from dyno.daemon.analysis.analyses import Analyses
from dyno.daemon.analysis.work import job_of
from dyno.daemon.callers import ADMIN, Caller
from dyno.daemon.jobs.attribution import user_name
from dyno.daemon.rpc_abort import abort
from dyno.daemon.tracing.access import unidentified_denied
from dyno.daemon.tracing.values import TraceView, UnknownTraceError
from dyno.error_reasons import ErrorReason
from dyno.trace_ids import validate_trace_id
from dyno.trace_summary import AnalysisState, TraceSummary
from dyno.trace_summary_pb import summary_to_proto
from dyno.v1 import dyno_pb2

__all__ = ["GetTraceSummaryRpc"]


class GetTraceSummaryRpc:
    def __init__(
        self,
        analyses: Analyses | None,
        trace_view: Callable[[str], TraceView] | None,
        hostname: str,
        caller_of: Callable[[grpc.ServicerContext], Caller] | None = None,
        name_of: Callable[[int], str] = user_name,
    ) -> None:
        self._analyses = analyses  # None: analysis_enabled is false
        self._trace_view = trace_view  # the trace manager's get (UnknownTraceError); None: tracing is off
        self._hostname = hostname
        self._caller_of = caller_of or (lambda context: ADMIN)
        self._name_of = name_of

    def __call__(
        self, request: dyno_pb2.GetTraceSummaryRequest, context: grpc.ServicerContext
    ) -> dyno_pb2.TraceSummary:
        try:
            validate_trace_id(request.trace_id)
        except ValueError as e:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"trace_id: {e}")
        caller = self._caller_of(context)
        denied = unidentified_denied(caller, "read trace summaries")
        if denied is not None:
            abort(context, grpc.StatusCode.PERMISSION_DENIED, denied.message, denied.reason)
        trace_id = request.trace_id
        found = self._analyses.lookup(trace_id) if self._analyses is not None else None
        if found is not None:
            if not caller.admin and (caller.uid is None or self._name_of(caller.uid) != found.summary.user):
                self._refuse(context, trace_id, caller)
            parts = found.rank_parts if request.include_rank_parts else b""
            return summary_to_proto(found.summary, parts, found.thinned and bool(parts))
        view = self._view(trace_id, context)
        if not all(caller.may_touch(p.uid) for p in view.processes):
            self._refuse(context, trace_id, caller)
        return summary_to_proto(self._unfinished(view))

    def _unfinished(self, view: TraceView) -> TraceSummary:
        """A trace without a finished analysis: DISABLED, PENDING or RUNNING (a finished one is queued again)."""
        analyses = self._analyses
        job = job_of(view, self._hostname, self._name_of)
        if analyses is None:
            return job.summary(AnalysisState.DISABLED)
        state = analyses.state_of(view.trace_id)
        # finished without files: TRACE_FAILED at once (stored by the queue's thread); else queued again unless queued
        if view.finished and (not job.files or state is None):
            return analyses.analyse_again(job)
        return job.summary(state or AnalysisState.PENDING)

    def _view(self, trace_id: str, context: grpc.ServicerContext) -> TraceView:
        if self._trace_view is None:
            abort(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"no trace {trace_id!r} on host {self._hostname}",
                ErrorReason.TRACE_NOT_FOUND,
            )
        try:
            return self._trace_view(trace_id)
        except UnknownTraceError as e:
            abort(context, grpc.StatusCode.NOT_FOUND, str(e), e.reason)

    @staticmethod
    def _refuse(context: grpc.ServicerContext, trace_id: str, caller: Caller) -> None:
        abort(
            context,
            grpc.StatusCode.PERMISSION_DENIED,
            f"trace {trace_id!r} is of another user's processes: {caller.who()} may read only the summaries of "
            "traces of its own processes",
            ErrorReason.NOT_YOUR_PROCESS,
        )

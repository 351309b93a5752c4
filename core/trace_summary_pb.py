"""dyno.trace_summary's TraceSummary to and from dyno.v1.TraceSummary (daemon: to; clients: from)."""

from __future__ import annotations

from dyno.message_fields import from_message
from dyno.trace_summary import AnalysisFailure, AnalysisState, RankStepStats, RuleLoss, TraceSummary
from dyno.v1 import dyno_pb2

__all__ = ["failure_from_proto", "summary_from_proto", "summary_to_proto"]

_STATE_PREFIX = "ANALYSIS_STATE_"
_FAILURE_PREFIX = "ANALYSIS_FAILURE_"


def summary_to_proto(s: TraceSummary, rank_parts: bytes = b"", thinned: bool = False) -> dyno_pb2.TraceSummary:
    failure = "UNSPECIFIED" if s.failure is AnalysisFailure.NONE else s.failure.value
    return dyno_pb2.TraceSummary(
        trace_id=s.trace_id,
        job_id=s.job_id,
        user=s.user,
        hostname=s.hostname,
        periodic=s.periodic,
        state=dyno_pb2.AnalysisState.Value(_STATE_PREFIX + s.state.value),
        failure=dyno_pb2.AnalysisFailure.Value(_FAILURE_PREFIX + failure),
        failure_message=s.failure_message,
        trace_finished_ms=s.trace_finished_ms,
        analyzed_ms=s.analyzed_ms,
        analysis_cpu_s=s.analysis_cpu_s,
        rules=[dyno_pb2.RuleLoss(**vars(r)) for r in s.rules],
        ranks=[dyno_pb2.RankStepStats(**vars(r)) for r in s.ranks],
        rank_parts=rank_parts,
        rank_parts_thinned=thinned,
        analysed_window=s.analysed_window,
    )


def failure_from_proto(value: int) -> AnalysisFailure:
    """A dyno.v1.AnalysisFailure value as AnalysisFailure: UNSPECIFIED is NONE, a value this side does not know (a
    newer daemon's) CRASHED."""
    name = dyno_pb2.AnalysisFailure.Name(value) if value in dyno_pb2.AnalysisFailure.values() else ""  # type: ignore[arg-type]
    failure = name.removeprefix(_FAILURE_PREFIX)
    if failure in ("UNSPECIFIED", ""):
        return AnalysisFailure.NONE if name else AnalysisFailure.CRASHED
    return AnalysisFailure(failure) if failure in AnalysisFailure.__members__ else AnalysisFailure.CRASHED


def summary_from_proto(m: dyno_pb2.TraceSummary, *, with_ranks: bool = True) -> TraceSummary:
    """The summary a daemon sent (an unknown enum value from a newer daemon reads as PENDING / CRASHED).
    ``with_ranks`` False leaves the per-rank statistics out (most of the conversion's time, for readers of rules
    only: dyno-cli opportunities over a fleet's records)."""
    state_name = dyno_pb2.AnalysisState.Name(m.state) if m.state in dyno_pb2.AnalysisState.values() else ""
    state = state_name.removeprefix(_STATE_PREFIX)
    return TraceSummary(
        trace_id=m.trace_id,
        job_id=m.job_id,
        user=m.user,
        hostname=m.hostname,
        periodic=m.periodic,
        state=AnalysisState(state) if state in AnalysisState.__members__ else AnalysisState.PENDING,
        failure=failure_from_proto(m.failure),
        failure_message=m.failure_message,
        trace_finished_ms=m.trace_finished_ms,
        analyzed_ms=m.analyzed_ms,
        analysis_cpu_s=m.analysis_cpu_s,
        rules=tuple(from_message(RuleLoss, r) for r in m.rules),
        ranks=tuple(from_message(RankStepStats, r) for r in (m.ranks if with_ranks else ())),
        analysed_window=m.analysed_window,
    )

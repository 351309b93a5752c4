"""dyno.trace_summary: the JSON form round-trips, the proto form round-trips, and bad documents are refused by name."""

from __future__ import annotations

import json

import pytest

from dyno.trace_summary import (
    AnalysisFailure,
    AnalysisState,
    RankStepStats,
    RuleLoss,
    SummaryFormatError,
    TraceSummary,
    newness,
)
from dyno.trace_summary_pb import failure_from_proto, summary_from_proto, summary_to_proto
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit

DONE = TraceSummary(
    trace_id="periodic-j1-20261202T010000Z",
    job_id="j1",
    user="alice",
    hostname="h1",
    periodic=True,
    state=AnalysisState.DONE,
    trace_finished_ms=1_700_000_000_000,
    analyzed_ms=1_700_000_001_000,
    analysis_cpu_s=0.5,
    rules=(RuleLoss("dataloader", "HIGH", 0.31, 1.5e6, 2, "DataLoader stalls", "more workers"),),
    ranks=(RankStepStats(rank=0, steps=5, mean_step_us=1e5, median_step_us=9e4, max_step_us=2e5, window_us=5e5),),
    analysed_window="5 profiler steps",
)


def test_json_round_trip_keeps_every_field() -> None:
    doc = json.loads(json.dumps(DONE.to_json()))
    assert TraceSummary.from_json(doc) == DONE
    assert DONE.share_of("dataloader") == 0.31 and DONE.share_of("straggler") == 0.0
    assert DONE.finished


def test_proto_round_trip_keeps_every_field() -> None:
    assert summary_from_proto(summary_to_proto(DONE)) == DONE
    failed = DONE.failed(AnalysisFailure.TIMED_OUT, "past 600 s", 5)
    back = summary_from_proto(summary_to_proto(failed))
    assert back.state is AnalysisState.FAILED and back.failure is AnalysisFailure.TIMED_OUT
    assert back.rules == () and back.failure_message == "past 600 s"


def test_unknown_keys_of_a_newer_writer_are_kept() -> None:
    doc = DONE.to_json() | {"version": 2, "new_thing": [1]}
    assert TraceSummary.from_json(doc).extra == {"new_thing": [1]}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"schema": "other"}, "schema"),
        ({"version": True}, "version"),
        ({"trace_id": ""}, "trace_id"),
        ({"state": "EXPLODED"}, "state"),
        ({"analysis_cpu_s": float("nan")}, "analysis_cpu_s"),
        ({"trace_finished_ms": -1}, "trace_finished_ms"),
        ({"rules": [{"rule": "x", "time_lost_share": "big"}]}, "time_lost_share"),
        ({"ranks": {"rank": 0}}, "ranks"),
        ({"rules": [{"rule": "x"}] * 65}, "rules"),
    ],
)
def test_a_bad_document_is_refused_naming_the_field(change: dict[str, object], named: str) -> None:
    with pytest.raises(SummaryFormatError, match=named):
        TraceSummary.from_json(DONE.to_json() | change)


def test_texts_are_bounded() -> None:
    s = TraceSummary.from_json(DONE.to_json() | {"failure_message": "x" * 5000})
    assert len(s.failure_message) == 1024


def test_failure_values_from_the_wire_unspecified_is_none_and_an_unknown_one_crashed() -> None:
    assert failure_from_proto(dyno_pb2.ANALYSIS_FAILURE_UNSPECIFIED) is AnalysisFailure.NONE
    assert failure_from_proto(dyno_pb2.ANALYSIS_FAILURE_TIMED_OUT) is AnalysisFailure.TIMED_OUT
    assert failure_from_proto(999) is AnalysisFailure.CRASHED  # a newer daemon's reason
    assert summary_from_proto(dyno_pb2.TraceSummary(failure=999)).failure is AnalysisFailure.CRASHED  # type: ignore[arg-type]


def test_newness_orders_by_the_traces_end_then_the_analysis_alike_for_the_proto() -> None:
    """An older trace analysed later is older (decision 68); at equal trace times the one analysed later is newer."""
    older_trace = TraceSummary("a", trace_finished_ms=1_000, analyzed_ms=9_000)
    newer_trace = TraceSummary("b", trace_finished_ms=2_000, analyzed_ms=3_000)
    analysed_later = TraceSummary("c", trace_finished_ms=2_000, analyzed_ms=4_000)
    assert newness(older_trace) < newness(newer_trace) < newness(analysed_later)
    assert newness(summary_to_proto(analysed_later)) == newness(analysed_later) == (2_000, 4_000)

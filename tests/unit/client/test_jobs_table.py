"""jobs_table.analysis_text: a job's latest analysis in the ANALYSIS column."""

from __future__ import annotations

import pytest

from dyno.client.jobs_table import analysis_text
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def test_done_names_the_costliest_rule_and_failed_names_the_failure() -> None:
    done = dyno_pb2.TraceSummary(
        state=dyno_pb2.ANALYSIS_STATE_DONE,
        rules=[
            dyno_pb2.RuleLoss(rule="optimizer", time_lost_share=0.1),
            dyno_pb2.RuleLoss(rule="tiny-ops", time_lost_share=0.5),
        ],
    )
    assert analysis_text(done) == "tiny-ops 50%"
    assert analysis_text(dyno_pb2.TraceSummary(state=dyno_pb2.ANALYSIS_STATE_DONE)) == "no findings"
    failed = dyno_pb2.TraceSummary(state=dyno_pb2.ANALYSIS_STATE_FAILED, failure=dyno_pb2.ANALYSIS_FAILURE_TIMED_OUT)
    assert analysis_text(failed) == "analysis failed: timed out"
    assert analysis_text(dyno_pb2.TraceSummary(state=dyno_pb2.ANALYSIS_STATE_FAILED)) == "analysis failed: unknown"
    assert analysis_text(dyno_pb2.TraceSummary(state=dyno_pb2.ANALYSIS_STATE_PENDING)) == ""

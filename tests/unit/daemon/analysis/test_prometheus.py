"""The analyses' Prometheus series beside the job series, through the exposition and the real text parser."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dyno.daemon.analysis.prometheus import MAX_RULES_PER_JOB, analysis_families
from dyno.daemon.jobs.records import JobRecord
from dyno.trace_summary import AnalysisFailure, AnalysisState, RuleLoss, TraceSummary

pytestmark = pytest.mark.unit


class _Collector:
    def __init__(self, families: list) -> None:
        self.families = families

    def collect(self):  # type: ignore[no-untyped-def]
        return self.families


def _scrape(families: list) -> dict[str, list]:
    registry = CollectorRegistry()
    registry.register(_Collector(families))  # type: ignore[arg-type]
    text = generate_latest(registry).decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_each_jobs_latest_analysis_gives_its_rules_shares_and_its_time() -> None:
    records = [
        JobRecord("a", "alice", "h", 1, 2, True),
        JobRecord("b", "bob", "h", 1, 2, True),
        JobRecord("never", "carol", "h", 1, 2, True),
    ]
    rules = tuple(RuleLoss(f"r{i}", "LOW", i / 100) for i in range(40)) + (
        RuleLoss("r39", "LOW", 0.01),
        RuleLoss("big", "HIGH", 7.0),
    )
    latest = {
        ("a", "alice"): TraceSummary("t1", state=AnalysisState.DONE, analyzed_ms=1_700_000_000_500, rules=rules),
        ("b", "bob"): TraceSummary("t2", analyzed_ms=1_700_000_001_000).failed(
            AnalysisFailure.CRASHED, "x", 1_700_000_001_000
        ),
    }
    got = _scrape(analysis_families("node1", records, latest))
    lost = got["dyno_job_analysis_time_lost_ratio"]
    assert {s.labels["job_id"] for s in lost} == {"a"} and len(lost) == MAX_RULES_PER_JOB
    by_rule = {s.labels["rule"]: s.value for s in lost}
    assert by_rule["big"] == 1.0 and by_rule["r39"] == 0.39 and "r0" not in by_rule  # clipped; the costliest kept
    assert lost[0].labels == {"host": "node1", "job_id": "a", "user": "alice", "rule": "big"}
    when = {s.labels["job_id"]: s.value for s in got["dyno_job_analysis_timestamp_seconds"]}
    assert when == {"a": 1_700_000_000.5}  # a failed analysis has no time: its job counts as never analysed
    assert [(s.labels["job_id"], s.value) for s in got["dyno_job_analysis_failed"]] == [("b", 1.0)]

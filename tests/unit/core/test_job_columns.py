"""job_columns: a page of records as columns, entry i of each column record i's; the costliest rule and the page's
name tables; a page ended at the byte bound (at least one record), at most max_rows."""

from __future__ import annotations

import pytest

from dyno.job_columns import MAX_ROWS, fitting, job_columns
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def _done(*shares: tuple[str, float]) -> dyno_pb2.TraceSummary:
    rules = [dyno_pb2.RuleLoss(rule=r, time_lost_share=s) for r, s in shares]
    return dyno_pb2.TraceSummary(state=dyno_pb2.ANALYSIS_STATE_DONE, analyzed_ms=7, rules=rules)


def test_each_column_holds_the_records_fields_in_order() -> None:
    failed = dyno_pb2.TraceSummary(
        state=dyno_pb2.ANALYSIS_STATE_FAILED, failure=dyno_pb2.ANALYSIS_FAILURE_TIMED_OUT, analyzed_ms=9
    )
    records = [
        dyno_pb2.JobRecord(job_id="a", user="u", hostname="n1", first_seen_ms=1, last_seen_ms=2, running=True,
                           gpus_max=8, gpu_seconds=3.5, busy_gpu_seconds=1.5, sm_active_gpu_seconds=0.5,
                           gpm_gpu_seconds=3.5, traces=2, simulated=True,
                           latest_analysis=_done(("x", 0.1), ("dataloader", 0.4), ("y", 0.4))),
        dyno_pb2.JobRecord(job_id="b", user="v", hostname="n2", latest_analysis=failed),
        dyno_pb2.JobRecord(job_id="c", user="u", hostname="n1", latest_analysis=_done()),
        dyno_pb2.JobRecord(job_id="d", user="u", hostname="n1"),
    ]  # fmt: skip
    assert fitting(records) == 4
    c = job_columns(records)
    assert list(c.job_id) == ["a", "b", "c", "d"] and [c.users[i] for i in c.user_index] == ["u", "v", "u", "u"]
    assert len(c.users) == 2
    assert [c.hostnames[i] for i in c.hostname_index] == ["n1", "n2", "n1", "n1"] and len(c.hostnames) == 2
    assert (c.first_seen_ms[0], c.last_seen_ms[0], c.running[0], c.gpus_max[0], c.traces[0]) == (1, 2, True, 8, 2)
    assert (c.gpu_seconds[0], c.busy_gpu_seconds[0]) == (3.5, 1.5) and list(c.simulated) == [True, False, False, False]
    # sparse: GPM of the one record that has it, analyses of the three records that have one
    assert (list(c.gpm_rows), list(c.sm_active_gpu_seconds), list(c.gpm_gpu_seconds)) == ([0], [0.5], [3.5])
    assert list(c.analysed_rows) == [0, 1, 2] and list(c.analyzed_ms) == [7, 9, 7]
    assert list(c.analysis_state) == [
        dyno_pb2.ANALYSIS_STATE_DONE,
        dyno_pb2.ANALYSIS_STATE_FAILED,
        dyno_pb2.ANALYSIS_STATE_DONE,
    ]
    assert c.analysis_failure[1] == dyno_pb2.ANALYSIS_FAILURE_TIMED_OUT
    # the costliest rule, the first of equal shares; none for a failed analysis or one without findings
    assert list(c.top_rule) == [0, -1, -1] and list(c.rules) == ["dataloader"]
    assert list(c.top_rule_share) == [0.4, 0.0, 0.0]


def test_a_page_ends_at_the_byte_bound_or_max_rows_and_holds_at_least_one_record() -> None:
    records = [dyno_pb2.JobRecord(job_id="j" * 100, user=f"u{i}") for i in range(50)]
    took = fitting(records, max_bytes=2000)
    c = job_columns(records[:took])
    assert 5 <= took < 20 and len(c.job_id) == len(c.gpus_max) == took
    assert c.ByteSize() <= 2000
    assert fitting(records, max_bytes=1) == 1
    assert fitting(records, max_rows=3) == 3
    assert fitting([]) == 0
    many = [dyno_pb2.JobRecord(job_id=f"{i}") for i in range(MAX_ROWS + 5)]
    assert fitting(many) == MAX_ROWS

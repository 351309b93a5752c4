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


def _analysed(i: int, *rules: tuple[str, float, str]) -> dyno_pb2.JobRecord:
    s = dyno_pb2.TraceSummary(
        state=dyno_pb2.ANALYSIS_STATE_DONE,
        analyzed_ms=i,
        rules=[dyno_pb2.RuleLoss(rule=r, time_lost_share=x, title=t, fix=f"fix {r}") for r, x, t in rules],
        ranks=[dyno_pb2.RankStepStats(rank=0, steps=5)],
    )
    return dyno_pb2.JobRecord(job_id=f"j{i}", user="u", latest_analysis=s)


def test_analysis_rules_add_every_rule_and_failure_message_of_each_analysis() -> None:
    failed = dyno_pb2.TraceSummary(
        state=dyno_pb2.ANALYSIS_STATE_FAILED, failure=dyno_pb2.ANALYSIS_FAILURE_CRASHED, failure_message="killed"
    )
    records = [
        _analysed(1, ("x", 0.1, "T1"), ("dataloader", 0.4, ""), ("x", 0.2, "T1")),
        dyno_pb2.JobRecord(job_id="none"),
        dyno_pb2.JobRecord(job_id="f", latest_analysis=failed),
        _analysed(2),
        _analysed(3, ("dataloader", 0.5, "T3")),
    ]
    c = job_columns(records, analysis_rules=True)
    a = c.analyses
    assert list(c.analysed_rows) == [0, 2, 3, 4] and list(a.rule_count) == [3, 0, 0, 1]  # a count per analysis
    assert [a.failure_messages[k] for k in a.failure_message_index] == ["", "killed", "", ""]
    assert [c.rules[k] for k in a.rule] == ["x", "dataloader", "x", "dataloader"]  # in each analysis' order
    assert list(a.time_lost_share) == [0.1, 0.4, 0.2, 0.5]
    assert [a.titles[k] for k in a.title_index] == ["T1", "", "T1", "T3"] and len(a.titles) == 3  # each once
    assert [a.fixes[k] for k in a.fix_index] == ["fix x", "fix dataloader", "fix x", "fix dataloader"]
    assert list(c.top_rule) == [0, -1, -1, 0] and list(c.rules) == ["dataloader", "x"]  # top_rule's table, shared
    assert not job_columns(records).HasField("analyses")  # only when asked
    assert job_columns([], analysis_rules=True).HasField("analyses")  # asked: set, even on an empty page


def test_with_analysis_rules_a_page_ends_at_the_byte_bound_counting_each_string_once() -> None:
    same = [_analysed(i, ("dataloader", 0.1, "t" * 60), ("x", 0.2, "t" * 60)) for i in range(60)]
    assert fitting(same, max_bytes=20_000, analysis_rules=True) == 60  # the title counted once a page
    distinct = [_analysed(i, ("dataloader", 0.1, f"{i}" * 300)) for i in range(60)]
    took = fitting(distinct, max_bytes=20_000, analysis_rules=True)
    assert 20 < took < 60 and fitting(distinct, max_bytes=20_000) == 60  # the titles count only when sent
    assert job_columns(distinct[:took], analysis_rules=True).ByteSize() <= 20_000

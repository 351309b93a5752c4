"""column_pages.check_page: a daemon's columnar ListJobs page is refused (MalformedPage, naming the columns) when a
column the readers read is not one entry a row (record, analysis, GPM row, rule) or an index falls out of its table;
dynod's own pages (job_columns), pages of records and top_rule -1 pass. pages.job_pages checks every page. JobKeys
codes (job id, user) keys over pages, first seen first; columns_of makes a page of records columns."""

from __future__ import annotations

import numpy as np
import pytest

from dyno.client.column_pages import (
    JobKeys,
    MalformedPage,
    check_page,
    codes,
    columns_of,
    newest_first,
    trace_finished,
)
from dyno.client.errors import DynoError
from dyno.client.pages import job_pages
from dyno.daemon.fake_server import fake_job_record
from dyno.job_columns import job_columns
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit

_PER_RECORD = [
    "user_index",
    "hostname_index",
    "first_seen_ms",
    "last_seen_ms",
    "running",
    "gpus_max",
    "gpu_seconds",
    "busy_gpu_seconds",
    "traces",
    "simulated",
]
_PER_GPM_ROW = ["sm_active_gpu_seconds", "gpm_gpu_seconds"]
_PER_ANALYSIS = [
    "analyzed_ms",
    "analysis_state",
    "analysis_failure",
    "top_rule",
    "top_rule_share",
    "analysis_trace_finished_ms",
]
_PER_ANALYSIS_RULES = ["rule_count", "failure_message_index"]
_PER_RULE = ["time_lost_share", "title_index", "fix_index"]
# index column -> the table it indexes (a column of the page, or of its analyses)
_INDEXES = {
    "user_index": "users",
    "hostname_index": "hostnames",
    "gpm_rows": "job_id",
    "analysed_rows": "job_id",
    "top_rule": "rules",
}
_ANALYSIS_INDEXES = {
    "failure_message_index": "failure_messages",
    "rule": "rules",
    "title_index": "titles",
    "fix_index": "fixes",
}


def _records() -> list[dyno_pb2.JobRecord]:
    """Records of two users and hosts, with GPM and analyses (DONE with rules, FAILED, none)."""
    out = []
    for i in range(1, 13):
        r = fake_job_record(f"node{i % 2}", i, analysis=True)  # i % 10 == 0: none; i == 1, 51: FAILED
        if i % 3 == 0:
            r.sm_active_gpu_seconds, r.gpm_gpu_seconds = 100.0, r.gpu_seconds
        out.append(r)
    return out


def _page(analysis_rules: bool = True) -> dyno_pb2.ListJobsResponse:
    page = dyno_pb2.ListJobsResponse(columns=job_columns(_records(), analysis_rules=analysis_rules))
    c = page.columns
    assert len(c.gpm_rows) and len(c.analysed_rows) < len(c.job_id) and -1 in c.top_rule
    assert len(c.analyses.rule) if analysis_rules else not c.HasField("analyses")
    return page


def _refused(page: dyno_pb2.ListJobsResponse, analyses: bool = True) -> str:
    with pytest.raises(MalformedPage) as e:
        check_page(page, analyses=analyses)
    return str(e.value)


def test_dynods_pages_and_pages_of_records_pass() -> None:
    check_page(_page(), analyses=True)
    check_page(_page(analysis_rules=False))
    empty = dyno_pb2.ListJobsResponse(columns=job_columns([], analysis_rules=True))
    check_page(empty, analyses=True)
    check_page(dyno_pb2.ListJobsResponse(jobs=_records()), analyses=True)


@pytest.mark.parametrize("column", _PER_RECORD + _PER_GPM_ROW + _PER_ANALYSIS)
def test_a_column_one_entry_short_is_named(column: str) -> None:
    page = _page()
    del getattr(page.columns, column)[-1]
    assert _refused(page) == f"a columnar ListJobs page whose columns do not agree: {column}"
    assert _refused(page, analyses=False).endswith(f": {column}")  # every reader of columns reads it


@pytest.mark.parametrize(
    ("column", "named"),
    [
        *((c, c) for c in _PER_ANALYSIS_RULES[1:] + _PER_RULE),
        ("rule_count", "rule_count, analyses.rule"),  # the rules no longer add up to the counts either
        ("rule", "rule, analyses.time_lost_share, analyses.title_index, analyses.fix_index"),  # one a rule
    ],
)
def test_an_analyses_column_one_entry_short_is_named_when_analyses_were_asked_for(column: str, named: str) -> None:
    page = _page()
    del getattr(page.columns.analyses, column)[-1]
    assert _refused(page).endswith(f"agree: analyses.{named}")
    check_page(page, analyses=False)  # dyno-cli jobs reads no analyses


@pytest.mark.parametrize("column", _INDEXES)
def test_an_index_out_of_its_table_is_named(column: str) -> None:
    for bad in (len(getattr(_page().columns, _INDEXES[column])), -2 if column == "top_rule" else -1):
        page = _page()
        getattr(page.columns, column)[0] = bad
        assert _refused(page, analyses=False) == f"a columnar ListJobs page whose columns do not agree: {column}"


@pytest.mark.parametrize("column", _ANALYSIS_INDEXES)
def test_an_analyses_index_out_of_its_table_is_named(column: str) -> None:
    page = _page()
    a = page.columns.analyses
    getattr(a, column)[-1] = len(getattr(page.columns if column == "rule" else a, _ANALYSIS_INDEXES[column]))
    assert _refused(page).endswith(f"agree: analyses.{column}")


def test_several_wrong_columns_are_named_once_each_and_a_negative_rule_count() -> None:
    page = _page()
    c = page.columns
    c.user_index[0] = len(c.users)
    del c.user_index[-1]
    c.analyses.rule_count[0] = -1
    assert _refused(page).endswith("agree: user_index, analyses.rule")


def test_columns_without_their_analyses_when_asked_for_them() -> None:
    page = _page(analysis_rules=False)
    assert "without its analyses' rules" in _refused(page)


def test_job_pages_checks_every_page_and_a_malformed_one_is_a_dyno_error() -> None:
    """As a host's pages arrive: its second page malformed ends the gathering with MalformedPage, the error of a
    failed call (Cluster makes its host a failed one; dyno-cli's main says it in one line)."""
    good, bad = _page(), _page()
    good.next_page_token = "2"
    bad.columns.hostname_index[3] = 99
    answers = {"": good, "2": bad}
    request = dyno_pb2.ListJobsRequest(columnar=True, analysis_rules=True)
    with pytest.raises(MalformedPage, match="agree: hostname_index$") as e:
        job_pages(lambda r: answers[r.page_token], request)
    assert isinstance(e.value, DynoError) and e.value.message == str(e.value)
    bad.columns.hostname_index[3] = 0
    assert job_pages(lambda r: answers[r.page_token], request) == [good, bad]


def test_job_keys_over_pages_first_seen_first() -> None:
    """A key's sparse code is its first record's number over all pages; dense codes and keys follow first sight.
    The same job id of two users is two keys; a user's code is shared across pages of different user tables."""
    rec = dyno_pb2.JobRecord
    first = job_columns([rec(job_id="b", user="u"), rec(job_id="a", user="v"), rec(job_id="b", user="u")])
    (second,) = columns_of(dyno_pb2.ListJobsResponse(jobs=[rec(job_id="a", user="u"), rec(job_id="a", user="v")]))
    keys = JobKeys()
    assert keys.add(first).tolist() == [0, 1, 0]
    assert keys.add(job_columns([])).tolist() == []
    assert keys.add(second).tolist() == [3, 1]
    assert keys.records == 5 and len(keys) == 3
    assert keys.dense()[[0, 1, 3]].tolist() == [0, 1, 2]
    assert keys.keys() == [("b", "u"), ("a", "v"), ("a", "u")]
    assert list(columns_of(dyno_pb2.ListJobsResponse())) == []


def test_an_older_dynods_page_without_trace_times_passes_and_reads_as_0() -> None:
    page = _page()
    c = page.columns
    assert len(c.analysis_trace_finished_ms) == len(c.analysed_rows) > 0
    assert trace_finished(c).tolist() == list(c.analysis_trace_finished_ms)
    del c.analysis_trace_finished_ms[:]
    check_page(page, analyses=True)
    assert trace_finished(c).tolist() == [0] * len(c.analysed_rows)


def test_codes_of_a_pages_tables_in_the_fleets() -> None:
    table: dict[str, int] = {"b": 0}
    assert codes(table, ["a", "b", "c"], [2, 0, 1, -1, 0]).tolist() == [2, 1, 0, -1, 1]  # -1 stays -1 (no rule)
    assert table == {"b": 0, "a": 1, "c": 2}
    assert codes(table, [], []).tolist() == []


def test_newest_first_orders_by_trace_then_analysis_time_without_overflow() -> None:
    """Indexes as np.lexsort of newest_first's keys puts them: the greatest trace time first, then analyzed_ms, then
    the earlier index; int64's least (whose negation overflows) last of all."""
    least, most = -(2**63), 2**63 - 1
    trace = [0, 5, 5, least, 5, most, least]
    analyzed = [9, 1, 2, most, 2, least, least]
    order = np.lexsort((np.arange(len(trace)), *newest_first(trace, analyzed)))
    assert order.tolist() == [5, 2, 4, 1, 0, 3, 6]

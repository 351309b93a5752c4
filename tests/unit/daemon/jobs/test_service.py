"""ListJobs' request checks, pages and answer size over a JobAccounting with stored records."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from grpc_context import Aborted, AbortingContext

from dyno import job_columns
from dyno.daemon.callers import Caller
from dyno.daemon.jobs.accounting import AccountingConfig, JobAccounting
from dyno.daemon.jobs.records import MAX_LISTED, JobRecord
from dyno.daemon.jobs.service import MAX_PAGE_SIZE, ListJobsRpc, columnar_response
from dyno.v1 import dyno_pb2


def _accounting(tmp_path: Path, n: int) -> JobAccounting:
    acc = JobAccounting(AccountingConfig(state_dir=tmp_path, hostname="h"), list, list)
    acc.start()
    assert acc._store is not None
    big = tuple(range(MAX_LISTED))
    acc._store.save(
        JobRecord("x" * 128, "u" * 32, "h" * 64, i, i + 1, False, pids=big, ranks=big, gpu_indices=big)
        for i in range(n)
    )
    return acc


def _pages(rpc: ListJobsRpc, **fields: object) -> list[dyno_pb2.ListJobsResponse]:
    """Every page of the ListJobs answer to a request of `fields` (page_token aside), following next_page_token."""
    pages, token = [], ""
    while True:
        request = dyno_pb2.ListJobsRequest(page_token=token, **fields)  # type: ignore[arg-type]
        pages.append(rpc(request, AbortingContext()))  # type: ignore[arg-type]
        token = pages[-1].next_page_token
        if not token:
            return pages


def test_pages_cover_every_record_once_and_a_full_page_fits_a_stock_client(tmp_path: Path) -> None:
    acc = _accounting(tmp_path, 2500)
    pages = _pages(ListJobsRpc(lambda: acc, "h"), page_size=MAX_PAGE_SIZE)
    seen = [j.record_id for page in pages for j in page.jobs]
    assert sorted(seen) == list(range(1, 2501)) and len(set(seen)) == 2500
    assert max(page.ByteSize() for page in pages) < 4 * 1024 * 1024 - 64 * 1024


def test_columnar_pages_hold_the_records_pages_as_columns_and_end_at_the_byte_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    acc = _accounting(tmp_path, 1200)
    rpc = ListJobsRpc(lambda: acc, "h")
    records = [j for page in _pages(rpc) for j in page.jobs]
    (whole,) = _pages(rpc, columnar=True)  # 1200 rows of long strings (~250 bytes each): one page
    assert not whole.jobs and whole.hostname == "h" and len(whole.columns.job_id) == 1200
    assert whole.columns == job_columns.job_columns(records)  # the record pages' fields, in their order
    assert (
        len(_pages(rpc, columnar=True, page_size=100)) == 12
        and not _pages(rpc, columnar=True, user="nobody")[0].columns.job_id
    )
    monkeypatch.setattr(job_columns, "MAX_BYTES", 30_000)  # the bound (2 MiB) scaled down: pages of ~120 rows
    pages = _pages(rpc, columnar=True)
    assert len(pages) > 5 and all(p.columns.ByteSize() <= 30_000 for p in pages)
    assert [j for p in pages for j in p.columns.first_seen_ms] == [r.first_seen_ms for r in records]  # each once


def test_a_columnar_page_may_hold_up_to_max_rows_and_an_empty_one_is_still_columnar(tmp_path: Path) -> None:
    acc = _two_users(tmp_path)
    alice = ListJobsRpc(lambda: acc, "h", lambda context: Caller(1000, False, "uid 1000"), {1000: "alice"}.get)
    (none,) = _pages(alice, columnar=True, user="bob")
    assert none.HasField("columns") and not none.columns.job_id
    assert len(_pages(alice, columnar=True, page_size=job_columns.MAX_ROWS)[0].columns.job_id) == 2
    with pytest.raises(Aborted) as e:
        _pages(alice, columnar=True, page_size=job_columns.MAX_ROWS + 1)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "0-10000" in e.value.details


@pytest.mark.parametrize(
    ("request_fields", "field"),
    [
        ({"page_token": "nope"}, "page_token"),
        ({"page_token": "j1:" + "9" * 30}, "page_token"),
        ({"page_token": "j1:" + "9" * 19}, "page_token"),  # past int64: SQLite cannot take it
        ({"page_token": "j1:\u00b2"}, "page_token"),  # a digit to str.isdigit, not to int()
        ({"page_size": MAX_PAGE_SIZE + 1}, "page_size"),
        ({"since_ms": -1}, "since_ms"),
        ({"job_id": "j" * 129}, "job_id"),
        ({"user": "u" * 257}, "user"),
    ],
)
def test_bad_requests_are_invalid_argument_naming_the_field(tmp_path: Path, request_fields: dict, field: str) -> None:
    rpc = ListJobsRpc(lambda: _accounting(tmp_path, 1), "h")
    with pytest.raises(Aborted) as e:
        rpc(dyno_pb2.ListJobsRequest(**request_fields), AbortingContext())  # type: ignore[arg-type]
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and field in e.value.details


def _two_users(tmp_path: Path) -> JobAccounting:
    acc = JobAccounting(AccountingConfig(state_dir=tmp_path, hostname="h"), list, list)
    acc.start()
    assert acc._store is not None
    acc._store.save(JobRecord(f"job-{u}", u, "h", 1, 2, False) for u in ("alice", "bob", "alice"))
    return acc


def _jobs(rpc: ListJobsRpc, **fields: object) -> list[tuple[str, str]]:
    answer = rpc(dyno_pb2.ListJobsRequest(**fields), AbortingContext())  # type: ignore[arg-type]
    return [(j.job_id, j.user) for j in answer.jobs]


def test_an_admin_sees_every_job_and_a_local_user_only_their_own(tmp_path: Path) -> None:
    acc = _two_users(tmp_path)
    names = {1000: "alice", 1001: "bob", 1002: "carol"}
    admin = ListJobsRpc(lambda: acc, "h", lambda context: Caller(0, True, "uid 0"), names.__getitem__)
    assert _jobs(admin) == [("job-alice", "alice"), ("job-bob", "bob"), ("job-alice", "alice")]
    assert _jobs(admin, user="bob") == [("job-bob", "bob")]
    alice = ListJobsRpc(lambda: acc, "h", lambda context: Caller(1000, False, "uid 1000"), names.__getitem__)
    assert _jobs(alice) == [("job-alice", "alice"), ("job-alice", "alice")]
    assert _jobs(alice, user="alice") == [("job-alice", "alice"), ("job-alice", "alice")]
    assert _jobs(alice, user="bob") == []  # another user's: none are alice's to see
    carol = ListJobsRpc(lambda: acc, "h", lambda context: Caller(1002, False, "uid 1002"), names.__getitem__)
    assert _jobs(carol) == []


def test_an_unidentified_caller_is_refused_unless_dynod_trusts_such_callers(tmp_path: Path) -> None:
    acc = _two_users(tmp_path)
    rpc = ListJobsRpc(lambda: acc, "h", lambda context: Caller(None, False, "an unidentified caller"))
    with pytest.raises(Aborted) as e:
        rpc(dyno_pb2.ListJobsRequest(), AbortingContext())  # type: ignore[arg-type]
    assert e.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert "only identified users may list jobs" in e.value.details
    trusted = ListJobsRpc(lambda: acc, "h", lambda context: Caller(None, True, "an unidentified caller"))
    assert len(_jobs(trusted)) == 3


def test_a_columnar_page_with_analysis_rules_carries_every_rule_and_ends_at_the_byte_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    acc = _accounting(tmp_path, 3)
    rpc = ListJobsRpc(lambda: acc, "h")
    (asked,) = _pages(rpc, columnar=True, analysis_rules=True)  # the RPC passes the flag on (no analysis stored: empty)
    assert asked.columns.HasField("analyses") and not asked.columns.analyses.rule_count
    assert not _pages(rpc, columnar=True)[0].columns.HasField("analyses")

    def analysed(i: int) -> bytes:
        rules = [dyno_pb2.RuleLoss(rule=f"r{k}", time_lost_share=0.1, title=f"{i}-{k}" * 10) for k in range(3)]
        s = dyno_pb2.TraceSummary(state=dyno_pb2.ANALYSIS_STATE_DONE, analyzed_ms=i, rules=rules)
        return dyno_pb2.JobRecord(job_id=f"j{i}", user="u", record_id=i + 1, latest_analysis=s).SerializeToString()

    stored = [analysed(i) for i in range(200)]
    records = [dyno_pb2.JobRecord.FromString(r) for r in stored]
    whole = dyno_pb2.ListJobsResponse.FromString(columnar_response("h", stored, "", "", analysis_rules=True))
    assert whole.columns == job_columns.job_columns(records, analysis_rules=True) and not whole.next_page_token
    plain = dyno_pb2.ListJobsResponse.FromString(columnar_response("h", stored, "", ""))
    assert not plain.columns.HasField("analyses") and plain.columns == job_columns.job_columns(records)
    monkeypatch.setattr(job_columns, "MAX_BYTES", 20_000)  # titles of ~60 bytes, 3 a record: ~60 records a page
    cut = dyno_pb2.ListJobsResponse.FromString(columnar_response("h", stored, "", "", analysis_rules=True))
    took = len(cut.columns.job_id)
    assert 20 < took < 200 and cut.next_page_token == f"j1:{took}" and cut.columns.ByteSize() <= 20_000
    assert len(cut.columns.analyses.rule) == 3 * took

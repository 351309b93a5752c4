"""The fake dynod's ListJobs pages (dyno.daemon.fake_server), built once per process for every fake host: a columnar
page cut short by its byte budget (job_columns.fitting) is served from that cache too, with its own next page."""

from __future__ import annotations

import pytest

from dyno import job_columns
from dyno.daemon import fake_server
from dyno.daemon.fake_server import FakeDynoServicer
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


class _Active:
    def is_active(self) -> bool:
        return True


def test_a_columnar_page_cut_by_its_byte_budget_is_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fake_server, "_JOB_PAGES", {})
    monkeypatch.setattr(job_columns, "MAX_BYTES", 2000)  # a few rows a page
    built: list[int] = []
    record = fake_server.fake_job_record

    def counted(hostname: str, i: int, analysis: bool = False) -> dyno_pb2.JobRecord:
        built.append(i)
        return record(hostname, i, analysis)

    monkeypatch.setattr(fake_server, "fake_job_record", counted)
    request = dyno_pb2.ListJobsRequest(columnar=True)
    answers = []
    for host in ("a", "b"):  # two fake hosts of one process
        answer = FakeDynoServicer(host, jobs=500).ListJobsEncoded(request, _Active())  # type: ignore[arg-type]
        answers.append(dyno_pb2.ListJobsResponse.FromString(answer))
        if host == "a":
            assert built == list(range(500))  # the whole page's records, once
    first, second = answers
    cut = int(first.next_page_token)
    assert 0 < cut < 500 and len(first.columns.job_id) == cut
    assert built == list(range(500))  # the second host's page came from the cache
    assert (second.hostname, second.next_page_token, second.columns) == ("b", str(cut), first.columns)

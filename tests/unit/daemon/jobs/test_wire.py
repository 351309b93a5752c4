"""ListJobs' answer joined from stored encodings: byte for byte what protobuf writes for the same message, for
running, ended and closed-at-restart records (whose columns override their encoding)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dyno.daemon.jobs.records import MAX_LISTED, JobRecord
from dyno.daemon.jobs.store import JobQuery, JobStore
from dyno.daemon.jobs.wire import (
    LATEST_ANALYSIS_FIELD,
    RECORD_ID_FIELD,
    list_jobs_response,
    stored_record,
    with_latest_analysis,
)
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def test_record_id_is_the_stored_encodings_last_field_and_only_latest_analysis_follows_it() -> None:
    fields = dyno_pb2.JobRecord.DESCRIPTOR.fields
    assert sorted(f.number for f in fields)[-2:] == [RECORD_ID_FIELD, LATEST_ANALYSIS_FIELD]
    assert dyno_pb2.JobRecord.DESCRIPTOR.fields_by_name["record_id"].number == RECORD_ID_FIELD
    assert dyno_pb2.JobRecord.DESCRIPTOR.fields_by_name["latest_analysis"].number == LATEST_ANALYSIS_FIELD


def test_the_latest_analysis_field_follows_the_record_as_protobuf_writes_it() -> None:
    summary = dyno_pb2.TraceSummary(trace_id="t" * 300, state=dyno_pb2.ANALYSIS_STATE_DONE, ranks=[{"rank": 3}])
    for rid in (0, 5, 2**40):
        m = dyno_pb2.JobRecord(job_id="a", gpus_max=3, pids=[1, 2], record_id=rid)
        data = m.SerializeToString()
        m.latest_analysis.CopyFrom(summary)
        assert with_latest_analysis(data, summary.SerializeToString()) == m.SerializeToString()


def _records() -> list[JobRecord]:
    big = tuple(range(MAX_LISTED))
    return [
        JobRecord("j" * 128, "ü" * 40, "h" * 200, 1, 2**40, False, gpus_max=8, gpu_indices=big, gpu_seconds=1.5),
        JobRecord("run", "alice", "h", 1_700_000_000_000, 1_700_000_060_000, True, gpus_held=4, pids=big, ranks=big),
        JobRecord("", "", "", 0, 0, False),  # every leading field at its default: absent from the encoding
        JobRecord("0\x01", "x", "h", 1, 2, False),  # running's bytes (30 01) by chance: parsed, the same bytes
        JobRecord("old", "bob", "h", 5, 6, True, gpus_held=2, energy_joules=3e9, simulated=True, source="cgroup"),
    ]


def test_stored_encodings_are_the_parsed_records_encodings(tmp_path: Path) -> None:
    store = JobStore.in_dir(tmp_path)
    store.save(_records())
    store.running(now_ms=10_000, grace_ms=1000)  # closes "old" (and not "run"): columns now override its encoding
    q = JobQuery()
    protos = store.query_protos(q, 0, 100)
    encoded = store.query_encoded(q, 0, 100)
    assert [rid for rid, _ in encoded] == [m.record_id for m in protos] == [1, 2, 3, 4, 5]
    assert [e for _, (_, e, _) in encoded] == [m.SerializeToString() for m in protos]
    assert [key for _, (key, _, _) in encoded] == [(m.job_id, m.user) for m in protos]
    assert [latest for _, (_, _, latest) in encoded] == [b""] * 5  # no analyses
    assert [m.running for m in protos] == [False, True, False, False, False] and protos[4].gpus_held == 0
    store.close()


def test_the_record_id_field_follows_the_stored_encoding() -> None:
    m = dyno_pb2.JobRecord(job_id="a", gpus_max=3, gpu_seconds=1.0, pids=[1, 2])
    for rid in (1, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152, 2**40):
        m.record_id = 0
        data = m.SerializeToString()
        m.record_id = rid
        assert stored_record(data, rid) == m.SerializeToString()


@pytest.mark.parametrize(("hostname", "token", "problem"), [("node1", "j1:5", ""), ("", "", "disk full"), ("", "", "")])
def test_the_response_is_protobufs_encoding(hostname: str, token: str, problem: str) -> None:
    jobs = [dyno_pb2.JobRecord(job_id=f"j{i}", record_id=i + 1, pids=list(range(70))) for i in range(3)]
    expected = dyno_pb2.ListJobsResponse(hostname=hostname, jobs=jobs, next_page_token=token, store_problem=problem)
    got = list_jobs_response(hostname, [j.SerializeToString() for j in jobs], token, problem)
    assert got == expected.SerializeToString()

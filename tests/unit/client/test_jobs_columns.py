"""jobs_columns.from_pages (the numpy join of columnar pages) gives exactly jobs_table.from_records' rows: over
random records with every case the join treats (a job on several daemons and hostnames, several records of a job on
one daemon, partial GPM, running, simulated, analyses DONE / FAILED / with equal times), as columnar pages, as pages
of records (an older dynod) and both mixed."""

from __future__ import annotations

import random

import pytest
from job_pages import on_daemons, pages_of, shuffled_pages

from dyno.client.column_pages import check_page
from dyno.client.jobs_columns import from_pages
from dyno.client.jobs_table import from_records, to_json
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def _analysis(rng: random.Random) -> dyno_pb2.TraceSummary | None:
    kind = rng.random()
    if kind < 0.5:
        return None
    analyzed = rng.randrange(5)  # few values: equal times on one job's hosts, where the first record's wins
    if kind < 0.65:
        failure = rng.choice([0, 1, 2, 3, 4, 5, 6, 99])  # 99: a failure this client does not know
        return dyno_pb2.TraceSummary(state=dyno_pb2.ANALYSIS_STATE_FAILED, failure=failure, analyzed_ms=analyzed)  # type: ignore[arg-type]
    rules = [
        dyno_pb2.RuleLoss(rule=rng.choice(["dataloader", "straggler", "sync", "idle"]), time_lost_share=share)
        for share in rng.choices([0.0, 0.1, 0.25, 0.25, 0.5, 1.7, -0.1], k=rng.randrange(4))
    ]
    return dyno_pb2.TraceSummary(state=dyno_pb2.ANALYSIS_STATE_DONE, analyzed_ms=analyzed, rules=rules)


def _records(seed: int, n: int) -> list[tuple[str, dyno_pb2.JobRecord]]:
    rng = random.Random(seed)
    made = []
    for _ in range(n):
        gpu_s = rng.choice([0.0, 3600.0, rng.uniform(0, 1e5)])
        r = dyno_pb2.JobRecord(
            job_id=f"job-{rng.randrange(30)}",
            user=rng.choice(["alice", "bob", ""]),
            hostname=rng.choice(["node1", "node2", "node3", ""]),
            first_seen_ms=rng.randrange(10**12, 2 * 10**12),
            last_seen_ms=rng.randrange(10**12, 2 * 10**12),
            running=rng.random() < 0.1,
            simulated=rng.random() < 0.05,
            gpus_max=rng.randrange(9),
            gpu_seconds=gpu_s,
            busy_gpu_seconds=gpu_s * rng.random(),
            sm_active_gpu_seconds=gpu_s * rng.random(),
            gpm_gpu_seconds=rng.choice([gpu_s, gpu_s * 0.9995, gpu_s * 0.5, 0.0]),
            traces=rng.randrange(3),
        )
        made.append((r, _analysis(rng)))
    return on_daemons(rng, made)


@pytest.mark.parametrize("seed", range(12))
def test_columns_records_and_a_mixed_fleet_join_to_the_same_rows(seed: int) -> None:
    records = _records(seed, 200)
    daemons = sorted({d for d, _ in records})
    expected = from_records(records)
    assert len(expected) > 20 and any(r.analysis for r in expected) and any(r.host_count > 1 for r in expected)
    for columnar in (set(daemons), set(), set(daemons[::2])):
        pages = pages_of(records, columnar)
        for _, page in pages:
            check_page(page)  # as dynod makes them: pages.job_pages lets them through
        got = from_pages(pages)
        assert got == expected  # every field, floats to the bit, and the ranking
        assert to_json(got) == to_json(expected)


def test_a_daemons_pages_need_not_come_together() -> None:
    records = _records(7, 200)
    pages = shuffled_pages(records, random.Random(7))
    assert len(pages) > 2 * len({d for d, _ in records})
    assert from_pages(pages) == from_records(records)


def test_no_pages_and_empty_pages_are_no_rows() -> None:
    assert from_pages([]) == []
    assert from_pages([("a", dyno_pb2.ListJobsResponse()), ("b", dyno_pb2.ListJobsResponse(columns={}))]) == []

"""ListJobs pages of given records, as a fan-out receives them: for the tests of the joins over columnar pages."""

from __future__ import annotations

import itertools
import random

from dyno.job_columns import job_columns
from dyno.v1 import dyno_pb2

__all__ = ["on_daemons", "pages_of", "shuffled_pages"]


def pages_of(
    records: list[tuple[str, dyno_pb2.JobRecord]], columnar: set[str], *, analysis_rules: bool = False
) -> list[tuple[str, dyno_pb2.ListJobsResponse]]:
    """Each daemon's records (given with their daemon) in pages of at most 7, decoded from the wire: columns (with
    `analysis_rules` as dynod answers it) for the daemons in `columnar`, records for the others; then an empty
    columnar page per daemon (a last page)."""
    pages: list[tuple[str, dyno_pb2.ListJobsResponse]] = []
    for daemon in sorted({d for d, _ in records}):
        mine = [r for d, r in records if d == daemon]
        for i in range(0, len(mine), 7):
            chunk = mine[i : i + 7]
            if daemon in columnar:
                page = dyno_pb2.ListJobsResponse(columns=job_columns(chunk, analysis_rules=analysis_rules))
                page.columns.SetInParent()
            else:
                page = dyno_pb2.ListJobsResponse(jobs=chunk)
            pages.append((daemon, dyno_pb2.ListJobsResponse.FromString(page.SerializeToString())))
        empty = dyno_pb2.ListJobsResponse(columns=job_columns([], analysis_rules=analysis_rules))
        empty.columns.SetInParent()
        pages.append((daemon, dyno_pb2.ListJobsResponse.FromString(empty.SerializeToString())))
    return pages


def shuffled_pages(
    records: list[tuple[str, dyno_pb2.JobRecord]], rng: random.Random, *, analysis_rules: bool = False
) -> list[tuple[str, dyno_pb2.ListJobsResponse]]:
    """The records shuffled (in place: the order the pages hold them in), each run of one daemon's records a page
    (columns or records, at random): a daemon's pages apart from each other, in no order."""
    rng.shuffle(records)
    pages = []
    for daemon, run in itertools.groupby(records, key=lambda dr: dr[0]):
        chunk = [r for _, r in run]
        if rng.random() < 0.5:
            page = dyno_pb2.ListJobsResponse(columns=job_columns(chunk, analysis_rules=analysis_rules))
        else:
            page = dyno_pb2.ListJobsResponse(jobs=chunk)
        pages.append((daemon, page))
    return pages


def on_daemons(
    rng: random.Random, made: list[tuple[dyno_pb2.JobRecord, dyno_pb2.TraceSummary | None]]
) -> list[tuple[str, dyno_pb2.JobRecord]]:
    """Each record with its latest analysis (None: none) on one of 6 daemons at random, a daemon's records together
    (as a fan-out's answers come)."""
    out = []
    for r, analysis in made:
        if analysis is not None:
            r.latest_analysis.CopyFrom(analysis)
        out.append((f"host{rng.randrange(6)}:1778", r))
    out.sort(key=lambda dr: dr[0])
    return out

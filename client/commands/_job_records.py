"""The daemons' job records as `dyno-cli jobs` and `dyno-cli opportunities` gather them: ListJobs on every host the
host options name, every page of its answer (as columns: both commands ask for them)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dyno.client.commands._hosts import cluster_from_args

if TYPE_CHECKING:
    from dyno.client.cluster import HostResult
    from dyno.v1 import dyno_pb2

__all__ = ["HostRecords", "gather_records"]


@dataclass(frozen=True)
class HostRecords:
    """The daemons' ListJobs answers: every host's result, and "host: problem" for each job database that could
    not be used (running jobs only there)."""

    results: list[HostResult[list[dyno_pb2.ListJobsResponse]]]
    problems: list[str]

    def pages(self) -> Iterator[tuple[str, dyno_pb2.ListJobsResponse]]:
        """The pages of the hosts that answered, each with its daemon."""
        for r in self.results:
            if r.ok and r.value is not None:
                host = str(r.host)
                for page in r.value:
                    yield host, page

    def take_pages(self) -> Iterator[tuple[str, dyno_pb2.ListJobsResponse]]:
        """pages(), each host's let go once given (a fleet's answer need not stay in memory once read)."""
        for r in self.results:
            if r.ok and r.value is not None:
                host = str(r.host)
                while r.value:
                    yield host, r.value.pop(0)


def gather_records(args: argparse.Namespace, request: dyno_pb2.ListJobsRequest) -> HostRecords:
    """ListJobs on every host the host options name (every page), as `dyno-cli jobs` asks them. Call it under the
    caller's `gc_paused()`, which also covers the join of the records: the collector back on in between would walk
    the whole answer at its first collection."""
    with cluster_from_args(args) as cluster:
        results = cluster.list_job_pages(request)
    problems = []
    for r in results:
        said = [page.store_problem for page in r.value or () if page.store_problem] if r.ok else []
        if said:
            problems.append(f"{r.host}: {said[0]}")
    return HostRecords(results, problems)

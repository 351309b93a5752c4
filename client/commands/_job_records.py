"""The daemons' job records as `dyno-cli jobs` and `dyno-cli opportunities` gather them: ListJobs on every host the
host options name, its pages gathered."""

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

    results: list[HostResult[dyno_pb2.ListJobsResponse]]
    problems: list[str]

    def records(self) -> Iterator[tuple[str, dyno_pb2.JobRecord]]:
        """The records of the hosts that answered, each with its daemon (streamed: a fleet's are millions)."""
        for r in self.results:
            if r.ok and r.value is not None:
                host = str(r.host)
                for j in r.value.jobs:
                    yield host, j


def gather_records(args: argparse.Namespace, request: dyno_pb2.ListJobsRequest) -> HostRecords:
    """ListJobs on every host the host options name (their pages gathered), as `dyno-cli jobs` asks them. Call it
    under the caller's `gc_paused()`, which also covers the join of the records: the collector back on in between
    would walk the whole answer at its first collection."""
    with cluster_from_args(args) as cluster:
        results = cluster.list_jobs(request)
    problems = [f"{r.host}: {r.value.store_problem}" for r in results if r.ok and r.value and r.value.store_problem]
    return HostRecords(results, problems)

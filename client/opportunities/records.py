"""The inputs of `dyno-cli opportunities` from the daemons' ListJobs records (JobRecord.latest_analysis)."""

from __future__ import annotations

from collections.abc import Iterable

from dyno.client.opportunities.model import JobHost
from dyno.trace_summary import TraceSummary
from dyno.trace_summary_pb import summary_from_proto
from dyno.v1 import dyno_pb2

__all__ = ["from_records"]


def from_records(records: Iterable[tuple[str, dyno_pb2.JobRecord]]) -> list[JobHost]:
    """One JobHost per record, each given with the daemon it came from (ranking.merged joins a host's records of
    one job)."""
    return [
        JobHost(
            daemon=daemon,
            hostname=r.hostname,
            job_id=r.job_id,
            user=r.user,
            gpu_seconds=r.gpu_seconds,
            analysis=_analysis(r.latest_analysis) if r.HasField("latest_analysis") else None,
        )
        for daemon, r in records
    ]


def _analysis(m: dyno_pb2.TraceSummary) -> TraceSummary:
    """The analysis with its rules only: the per-rank step statistics, which the ranking does not read, were 9 in
    10 of the conversion's time (bench/opportunities_rank.py)."""
    return summary_from_proto(m, with_ranks=False)

"""Hand-built job records for the opportunities tests: two analysed jobs with two rules (one job on two hosts), a job
never analysed and one whose analysis failed. The expected figures are worked out in the comments."""

from __future__ import annotations

import grpc

from dyno.client.opportunities.model import JobHost
from dyno.daemon.fake_server import FakeDynoServicer
from dyno.trace_summary import AnalysisFailure, AnalysisState, RuleLoss, TraceSummary
from dyno.trace_summary_pb import summary_from_proto, summary_to_proto
from dyno.v1 import dyno_pb2

__all__ = ["H", "RecordsServicer", "analysis", "case_records", "job_hosts", "record"]

H = 3600.0


def analysis(*rules: tuple[str, float], failed: str = "", analyzed_ms: int = 2_000) -> TraceSummary:
    s = TraceSummary(
        trace_id="periodic-x",
        state=AnalysisState.DONE,
        analyzed_ms=analyzed_ms,
        rules=tuple(RuleLoss(rule, "high", share, title=f"{rule} title", fix=f"{rule} fix") for rule, share in rules),
    )
    return s.failed(AnalysisFailure.TIMED_OUT, failed, analyzed_ms) if failed else s


def record(job: str, user: str, host: str, gpu_hours: float, a: TraceSummary | None = None) -> dyno_pb2.JobRecord:
    r = dyno_pb2.JobRecord(job_id=job, user=user, hostname=host, gpu_seconds=gpu_hours * H, gpus_max=8)
    if a is not None:
        r.latest_analysis.CopyFrom(summary_to_proto(a))
    return r


def job_hosts(records: list[tuple[str, dyno_pb2.JobRecord]]) -> list[JobHost]:
    """ranking.rank's inputs of ListJobs records, one per record with its daemon: the specification the columnar
    ranking (column_ranking.rank_pages) is held to."""
    return [
        JobHost(
            daemon=daemon,
            hostname=r.hostname,
            job_id=r.job_id,
            user=r.user,
            gpu_seconds=r.gpu_seconds,
            analysis=summary_from_proto(r.latest_analysis, with_ranks=False) if r.HasField("latest_analysis") else None,
        )
        for daemon, r in records
    ]


def case_records(a: str, b: str) -> list[tuple[str, dyno_pb2.JobRecord]]:
    """Hosts a and b (daemons `a`, `b`).

    wide (alice): 10 GPU-h on a (dataloader 0.5, sync-calls 0.1) + 30 GPU-h on b (dataloader 0.2)
    narrow (bob): 20 GPU-h on a (sync-calls 0.25)
    dark (carol): 8 GPU-h on b, never analysed
    broken (dave): 4 GPU-h on a, analysis failed (timed out)

    dataloader = 10 x 0.5 + 30 x 0.2 = 11 GPU-h (1 job, 1 user, 2 hosts);
    sync-calls = 10 x 0.1 + 20 x 0.25 = 6 GPU-h (2 jobs, 2 users, 1 host);
    analysed 60, never analysed 12 (2 jobs, 1 failure), total 72.
    """
    return [
        (a, record("wide", "alice", "host-a", 10, analysis(("dataloader", 0.5), ("sync-calls", 0.1)))),
        (b, record("wide", "alice", "host-b", 30, analysis(("dataloader", 0.2)))),
        (a, record("narrow", "bob", "host-a", 20, analysis(("sync-calls", 0.25)))),
        (b, record("dark", "carol", "host-b", 8)),
        (a, record("broken", "dave", "host-a", 4, analysis(failed="worker killed after 120 s"))),
    ]


class RecordsServicer(FakeDynoServicer):
    """A fake daemon (dyno.daemon.fake_server) answering ListJobs with fixed records, in one page."""

    def __init__(self, hostname: str, records: list[dyno_pb2.JobRecord]) -> None:
        super().__init__(hostname)
        self.records = records

    def ListJobsEncoded(self, request: dyno_pb2.ListJobsRequest, context: grpc.ServicerContext) -> bytes:
        self._enter(context)
        return dyno_pb2.ListJobsResponse(hostname=self.hostname, jobs=self.records).SerializeToString()

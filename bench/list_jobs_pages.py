"""ListJobs over a large job database: every page of 100,000 stored records, timed per page, through the real
servicer path (ListJobsRpc.encoded over JobAccounting over JobStore: the encoded answer the server sends) and
through real gRPC on loopback.

    python bench/list_jobs_pages.py                   # 100,000 records, pages of 500 and 1000
    python bench/list_jobs_pages.py --records 20000 --page-size 1000
    python bench/list_jobs_pages.py --analyses        # each job with an analysis (ListJobs' latest_analysis)
    python bench/list_jobs_pages.py --columnar        # the columnar form (JobColumns), pages of 10,000
    python bench/list_jobs_pages.py --columnar --analyses --analysis-rules   # with every rule (dyno-cli opportunities)

Prints p50/p99/max per page for each page size (the first page of each run included).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent import futures
from pathlib import Path

import grpc

from dyno.daemon.analysis.listed import listed_form
from dyno.daemon.history import History
from dyno.daemon.jobs.accounting import AccountingConfig, JobAccounting
from dyno.daemon.jobs.records import JobRecord
from dyno.daemon.jobs.service import ListJobsRpc
from dyno.daemon.jobs.store import JobStore
from dyno.daemon.server import DynoServicer, add_to_server
from dyno.trace_summary import AnalysisState, RankStepStats, RuleLoss, TraceSummary
from dyno.v1 import dyno_pb2, dyno_pb2_grpc


def _fill(state: Path, n: int) -> None:
    store = JobStore.in_dir(state)
    batch = []
    for i in range(n):
        batch.append(
            JobRecord(
                f"{1_000_000 + i}_{i % 8}",
                f"user{i % 300}",
                "node001",
                1_700_000_000_000 + i * 60_000,
                1_700_000_000_000 + i * 60_000 + 3_600_000,
                False,
                gpus_max=8,
                gpu_indices=tuple(range(8)),
                gpu_seconds=28_800.0,
                busy_gpu_seconds=14_400.0,
                cpu_seconds=3_600.0,
                ranks=tuple(range(8)),
                pids=tuple(range(1000, 1016)),
                pid_count=16,
                source="environ",
            )  # fmt: skip
        )
        if len(batch) == 10_000:
            store.save(batch)
            batch = []
    store.save(batch)
    store.close()


def _fill_analyses(state: Path, n: int) -> None:
    """One analysis per job of _fill: 8 rules with findings and 8 ranks, ~1 KB in its ListJobs form."""
    store = JobStore.in_dir(state)
    rules = tuple(
        RuleLoss(f"rule-{k}", "MEDIUM", 0.01 * k, 1e6, 8, "a finding's title of some length") for k in range(8)
    )
    ranks = tuple(RankStepStats(k, 20, *(123456.7,) * 5, True, 0.3, 0.5, 0.1, 0.05) for k in range(8))
    rows = []
    for i in range(n):
        s = TraceSummary(
            f"t{i}",
            f"{1_000_000 + i}_{i % 8}",
            f"user{i % 300}",
            "node001",
            state=AnalysisState.DONE,
            trace_finished_ms=1_700_000_000_000 + i - 60_000,
            analyzed_ms=1_700_000_000_000 + i,
            rules=rules,
            ranks=ranks,
        )
        rows.append(
            (s.trace_id, s.job_id, s.user, "node001", "DONE", s.analyzed_ms, s.trace_finished_ms, "{}", listed_form(s))
        )
    store.write(
        lambda c: c.executemany(
            "INSERT INTO analyses (trace_id, job_id, user, hostname, state, finished_ms, trace_finished_ms, summary, "
            "listed, rank_parts, thinned, bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, x'', 0, 1)",
            rows,
        )
    )
    store.close()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _report(what: str, per_page: list[float], records: int) -> None:
    ms = [t * 1000 for t in per_page]
    print(
        f"{what}: {len(ms)} pages, {records} records; per page p50 {statistics.median(ms):.1f} ms, "
        f"p99 {_pct(ms, 0.99):.1f} ms, max {max(ms):.1f} ms"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--page-size", type=int, action="append", default=[])
    p.add_argument("--analyses", action="store_true", help="give every job an analysis (JobRecord.latest_analysis)")
    p.add_argument("--columnar", action="store_true", help="ask for the columnar form (ListJobsRequest.columnar)")
    p.add_argument("--analysis-rules", action="store_true", help="with --columnar: ask for every analysis' rules too")
    args = p.parse_args()
    sizes = args.page_size or ([10_000] if args.columnar else [500, 1000])
    with tempfile.TemporaryDirectory(prefix="dyno-bench-jobs-") as d:
        state = Path(d)
        t0 = time.perf_counter()
        _fill(state, args.records)
        if args.analyses:
            _fill_analyses(state, args.records)
        size = (state / "jobs.sqlite3").stat().st_size
        print(
            f"stored {args.records} records in {time.perf_counter() - t0:.1f} s ({size / 2**20:.1f} MiB); "
            f"cpus={os.cpu_count()}"
        )
        acc = JobAccounting(AccountingConfig(state_dir=state, hostname="node001"), list, list)
        acc.start()
        rpc = ListJobsRpc(lambda: acc, "node001")
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        add_to_server(DynoServicer(dyno_pb2.Status, History(1), "node001", list_jobs=rpc.encoded), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = dyno_pb2_grpc.DynoStub(channel)
        try:
            for size_ in sizes:
                for what, call, parse in (
                    ("in-process", lambda r: rpc.encoded(r, None), dyno_pb2.ListJobsResponse.FromString),
                    ("gRPC", lambda r: stub.ListJobs(r, timeout=30), lambda a: a),
                ):  # type: ignore[arg-type]
                    token, per_page, total = "", [], 0
                    while True:
                        t = time.perf_counter()
                        answer = call(
                            dyno_pb2.ListJobsRequest(
                                page_size=size_,
                                page_token=token,
                                columnar=args.columnar,
                                analysis_rules=args.analysis_rules,
                            )
                        )
                        per_page.append(time.perf_counter() - t)
                        answer = parse(answer)  # in-process: the servicer's work timed, the client's parse not
                        total += len(answer.jobs) + len(answer.columns.job_id)
                        token = answer.next_page_token
                        if not token:
                            break
                    form = ("columnar " if args.columnar else "") + ("with rules " if args.analysis_rules else "")
                    _report(f"{form}page_size {size_}, {what}", per_page, total)
        finally:
            channel.close()
            server.stop(0)
            acc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`dyno-cli opportunities`' own work on a fleet's answer, in this process, without the fan-out (bench/jobs_fanout.py
--opportunities times the whole command): the ListJobs pages ranked by column_ranking.rank_pages, as columns (what
dynod answers with analysis_rules) and as pages of records (an older dynod's, made columns by the client first).

    python bench/opportunities_rank.py                   # 256 hosts x 2,000 records, 3 repeats
    python bench/opportunities_rank.py --hosts 64 --jobs 500

Each record has its latest analysis as dyno.daemon.fake_server.fake_analysis makes it (3 rules, 8 ranks' step
statistics; every 10th none, every 50th FAILED). Prints the time of each form per repeat (garbage collection paused,
as the command does), and the process' peak RSS before the first and after the last.
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import time

from dyno.client.opportunities.column_ranking import rank_pages
from dyno.daemon.fake_server import fake_analysis
from dyno.job_columns import job_columns
from dyno.v1 import dyno_pb2

_PAGE = 1000  # records per page of records, as dynod's largest


def _pages(hosts: int, jobs: int) -> tuple[list[tuple[str, dyno_pb2.ListJobsResponse]], ...]:
    """Each host's records as pages of records and as one columnar page, both decoded from the wire."""
    records, columns = [], []
    for h in range(hosts):
        daemon, mine = f"gpu{h:04d}:1778", []
        for j in range(jobs):
            rec = dyno_pb2.JobRecord(
                job_id=f"job-{j}", user=f"user{j % 50}", hostname=f"gpu{h:04d}", gpu_seconds=8 * 3600.0
            )
            latest = fake_analysis(h * jobs + j)
            if latest is not None:
                rec.latest_analysis.CopyFrom(latest)
            mine.append(rec)
        for i in range(0, jobs, _PAGE):
            page = dyno_pb2.ListJobsResponse(jobs=mine[i : i + _PAGE]).SerializeToString()
            records.append((daemon, dyno_pb2.ListJobsResponse.FromString(page)))
        page = dyno_pb2.ListJobsResponse(columns=job_columns(mine, analysis_rules=True)).SerializeToString()
        columns.append((daemon, dyno_pb2.ListJobsResponse.FromString(page)))
    return records, columns


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=256)
    p.add_argument("--jobs", type=int, default=2000, help="records per host")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    forms = dict(zip(("records", "columns"), _pages(args.hosts, args.jobs), strict=True))
    before = _peak_rss_mib()
    print(f"{args.hosts * args.jobs:,} records ({args.hosts} hosts x {args.jobs:,}); peak RSS {before:.0f} MiB")
    times: dict[str, list[float]] = {form: [] for form in forms}
    for n in range(args.repeats):
        line = []
        for form, pages in forms.items():
            gc.collect()
            gc.disable()
            t0 = time.perf_counter()
            answer = rank_pages(pages, since_s=7 * 86400, source="bench")
            times[form].append(time.perf_counter() - t0)
            gc.enable()
            line.append(f"{form} {times[form][-1]:.2f} s")
        print(f"repeat {n + 1}: {', '.join(line)} ({len(answer.rules)} rules, {answer.job_count:,} jobs)")
    medians = ", ".join(f"{form} {statistics.median(t):.2f} s" for form, t in times.items())
    print(f"median: {medians}; peak RSS {_peak_rss_mib():.0f} MiB (+{_peak_rss_mib() - before:.0f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

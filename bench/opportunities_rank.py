"""`dyno-cli opportunities`' own work on a fleet's answer: the ListJobs records (each with its latest analysis: 3
rules, 8 ranks' step statistics) made into inputs (opportunities.records.from_records) and ranked
(opportunities.ranking.rank), in this process, without the fan-out (bench/jobs_fanout.py measures that).

    python bench/opportunities_rank.py                   # 256 hosts x 2,000 records, 3 repeats
    python bench/opportunities_rank.py --hosts 64 --jobs 500

Every 10th record has no analysis and every 50th a FAILED one. Prints the time of each step per repeat (garbage
collection paused, as the command does), and the process' peak RSS before the first and after the last.
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import time

from dyno.client.opportunities.ranking import rank
from dyno.client.opportunities.records import from_records
from dyno.daemon.fake_server import fake_analysis
from dyno.v1 import dyno_pb2


def _records(hosts: int, jobs: int) -> list[tuple[str, dyno_pb2.JobRecord]]:
    out = []
    for h in range(hosts):
        for j in range(jobs):
            rec = dyno_pb2.JobRecord(
                job_id=f"job-{j}", user=f"user{j % 50}", hostname=f"gpu{h:04d}", gpu_seconds=8 * 3600.0
            )
            latest = fake_analysis(h * jobs + j)
            if latest is not None:
                rec.latest_analysis.CopyFrom(latest)
            out.append((f"gpu{h:04d}:1778", rec))
    return out


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=256)
    p.add_argument("--jobs", type=int, default=2000, help="records per host")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    records = _records(args.hosts, args.jobs)
    before = _peak_rss_mib()
    print(f"{len(records):,} records ({args.hosts} hosts x {args.jobs:,}); peak RSS {before:.0f} MiB")
    times: list[tuple[float, float]] = []
    for n in range(args.repeats):
        gc.collect()
        gc.disable()
        t0 = time.perf_counter()
        inputs = from_records(records)
        t1 = time.perf_counter()
        answer = rank(inputs, since_s=7 * 86400, source="bench")
        t2 = time.perf_counter()
        gc.enable()
        del inputs
        times.append((t1 - t0, t2 - t1))
        print(f"repeat {n + 1}: from_records {t1 - t0:.2f} s, rank {t2 - t1:.2f} s "
              f"({len(answer.rules)} rules, {answer.job_count:,} jobs)")  # fmt: skip
    print(
        f"median: from_records {statistics.median(t[0] for t in times):.2f} s, "
        f"rank {statistics.median(t[1] for t in times):.2f} s; peak RSS {_peak_rss_mib():.0f} MiB "
        f"(+{_peak_rss_mib() - before:.0f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

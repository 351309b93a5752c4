"""A job's latest analysis looked up by key (dyno.daemon.analysis.store: AnalysisStore.latest_listed, what ListJobs
asks for records without a row yet and Prometheus' cache misses) and the cost of one save (its per-job trim), over a
real job database of JOBS jobs with PER_JOB analyses each, saved oldest trace last (as a restart's requeue saves
them). Everything is written under a temporary folder, removed at the end. Target: no slower than the `MAX(id)`
query of schema 4 (~31 ms for 1000 keys over 50,000 rows on the 2-core VM; docs/BENCHMARKS.md). A save is timed
under the byte budget and at it (each save then trims the oldest trace's row).

    python bench/analysis_latest.py [--jobs 10000] [--per-job 5] [--keys 1000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from dyno.daemon.analysis.listed import listed_form
from dyno.daemon.analysis.outcome import Outcome
from dyno.daemon.analysis.store import AnalysisStore
from dyno.daemon.jobs.store import JobStore
from dyno.trace_summary import AnalysisState, TraceSummary

_T0 = 1_800_000_000_000


def _fill(db: JobStore, jobs: int, per_job: int) -> None:
    """`per_job` rows a job, ~950 bytes of ListJobs' form each, its newest trace saved first."""
    listed = b"x" * 950
    rows = [
        (f"t{j}-{t}", f"job{j}", f"user{j % 300}", "node001", "DONE", _T0, _T0 - t * 60_000, "{}", listed)
        for j in range(jobs)
        for t in range(per_job)
    ]
    db.write(
        lambda c: c.executemany(
            "INSERT INTO analyses (trace_id, job_id, user, hostname, state, finished_ms, trace_finished_ms, summary, "
            "listed, rank_parts, thinned, bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, x'', 0, 1000)",
            rows,
        )
    )


def _saves(store: AnalysisStore, n: int, first: int) -> list[float]:
    """Milliseconds of each of `n` saves of a new trace's analysis (jobs `first`...), the newest trace each."""
    took = []
    for i in range(first, first + n):
        s = TraceSummary(
            f"new{i}",
            job_id=f"job{i}",
            user=f"user{i % 300}",
            hostname="node001",
            state=AnalysisState.DONE,
            trace_finished_ms=_T0 + i,
            analyzed_ms=_T0 + i,
        )
        t = time.perf_counter()
        store.save(Outcome(s), listed_form(s), _T0 + i)
        took.append((time.perf_counter() - t) * 1000)
    return took


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--per-job", type=int, default=5)
    p.add_argument("--keys", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="dyno-bench-latest-") as d:
        db = JobStore.in_dir(Path(d))
        _fill(db, args.jobs, args.per_job)
        store = AnalysisStore(lambda: db, retention_s=1e9, max_bytes=2**40, per_job=args.per_job)
        step = max(1, args.jobs // args.keys)
        keys = [(f"job{j}", f"user{j % 300}") for j in range(0, args.jobs, step)][: args.keys]
        lookups = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            found = store.latest_listed(keys)
            lookups.append((time.perf_counter() - t) * 1000)
        assert len(found) == len(keys), "every key has an analysis"
        saves = _saves(store, args.repeat, 0)
        # at the byte budget: each save trims the oldest trace's row
        store.max_bytes = db.read(lambda c: c.execute("SELECT total FROM analyses_bytes").fetchone()[0])
        trims = _saves(store, args.repeat, args.repeat)
        db.close()
    rows = args.jobs * args.per_job
    print(f"{rows} analyses of {args.jobs} jobs; cpus={os.cpu_count()}, load {os.getloadavg()[0]:.1f}")
    print(
        f"latest_listed of {len(keys)} keys: median {statistics.median(lookups):.1f} ms, min {min(lookups):.1f} ms "
        "(target: no slower than schema 4's MAX(id), ~31 ms)"
    )
    print(f"one save with its per-job trim: median {statistics.median(saves):.2f} ms, max {max(saves):.2f} ms")
    print(f"one save at the byte budget: median {statistics.median(trims):.2f} ms, max {max(trims):.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

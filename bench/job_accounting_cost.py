"""Cost of job accounting per sampling tick: 8 simulated GPUs holding 64 registered processes (real ones: `sleep`
children, so every /proc read is real), ticks run back to back on a simulated 1 s clock (flushes every 60 ticks
into a real SQLite file), against the same ticks without accounting; and the RSS over the run.

    python bench/job_accounting_cost.py                   # 1800 ticks: 30 minutes of 1 s sampling
    python bench/job_accounting_cost.py --ticks 600 --procs 64 --gpus 8
    python bench/job_accounting_cost.py --profile 3000     # cProfile of 3000 ticks: where a tick's time goes

Prints the CPU per tick with and without accounting (process time, median of 5 blocks), the added share of one core
at a 1 s interval, and the RSS after the first 100 ticks and at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dyno.daemon.history import Sample
from dyno.daemon.jobs.accounting import AccountingConfig, JobAccounting
from dyno.daemon.jobs.observe import Trainer
from dyno.daemon.samplers.gpu_sim import SimGpuSampler


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _profile(fn: Callable[[], object]) -> None:
    """The functions that took the most time in `fn` (cumulative and own), with their call counts."""
    prof = cProfile.Profile()
    prof.runcall(fn)
    for key in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats(key).print_stats(25)
        print(out.getvalue())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ticks", type=int, default=1800)
    p.add_argument("--procs", type=int, default=64)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--profile", type=int, default=0, metavar="TICKS", help="only profile this many ticks (cProfile)")
    args = p.parse_args()
    children = [subprocess.Popen(["sleep", "3600"]) for _ in range(args.procs)]
    clock = {"t": 0.0}
    sim = SimGpuSampler(args.gpus, clock=lambda: clock["t"])
    trainers = [
        Trainer(c.pid, f"job-{i // 8}", os.getuid(), rank=i % 8, local_rank=i % args.gpus)
        for i, c in enumerate(children)
    ]
    try:
        with tempfile.TemporaryDirectory(prefix="dyno-bench-acct-") as d:
            acc = JobAccounting(
                AccountingConfig(state_dir=Path(d), hostname="bench", interval_s=1.0, sim_gpus=args.gpus),
                lambda: trainers,
                list,
                set_sim_loads=sim.hold_loads,
                clock_ms=lambda: int(1_700_000_000_000 + clock["t"] * 1000),
                monotonic=lambda: clock["t"],
            )
            acc.start()

            def run(n: int, account: bool) -> float:
                start = time.process_time()
                for _ in range(n):
                    clock["t"] += 1.0
                    sample = Sample(int(1_700_000_000_000 + clock["t"] * 1000), tuple(sim.sample()))
                    if account:
                        acc.on_tick(sample)
                return (time.process_time() - start) / n

            run(100, True)
            if args.profile:
                _profile(lambda: run(args.profile, True))
                acc.stop()
                return 0
            rss_start = _rss_mib()
            block = max(1, args.ticks // 5)
            with_acc, without = [], []
            for _ in range(5):
                with_acc.append(run(block, True))
                without.append(run(max(1, block // 4), False))
            rss_end = _rss_mib()
            jobs = len(acc.book.records())
            acc.stop()
    finally:
        for c in children:
            c.kill()
            c.wait()
    base, total = statistics.median(without), statistics.median(with_acc)
    added = total - base
    print(f"{args.gpus} simulated GPUs, {args.procs} registered processes in {jobs} jobs, {5 * block + 100} ticks")
    print(f"CPU per tick: sampler alone {base * 1000:.2f} ms, with accounting {total * 1000:.2f} ms")
    print(f"accounting adds {added * 1000:.2f} ms per tick = {100 * added / 1.0:.3f}% of one core at a 1 s interval")
    print(f"RSS after 100 ticks {rss_start:.1f} MiB, after {5 * block + 100} ticks {rss_end:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

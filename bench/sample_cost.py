#!/usr/bin/env python3
"""The CPU cost of one sampling tick (host sampler + GPU sampler), the figure behind dynod's minimum interval_s.

Runs the daemon's own samplers in this process, `--ticks` times each, and prints the CPU time per tick (process
time, so a busy machine inflates it less than wall time) and what that costs as a share of one core at a few
sampling intervals. The GPU part uses NVML when it initialises (`--gpu-backend auto`), else the simulator with
`--sim-gpus` GPUs (its values are made up, but its per-GPU work, building readings and labels, is the daemon's).

    python bench/sample_cost.py [--ticks 2000] [--gpu-backend auto|nvml|sim|none] [--sim-gpus 8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

from dyno.daemon.config import MIN_INTERVAL_S
from dyno.daemon.history import History
from dyno.daemon.loop import SamplingLoop
from dyno.daemon.samplers.base import Sampler
from dyno.daemon.samplers.gpu import make_gpu_sampler
from dyno.daemon.samplers.host import HostSampler


def per_call_ms(call: Callable[[], int], ticks: int) -> tuple[float, float, int]:
    """(median, p99) process-CPU ms of one call over `ticks` calls, and what the last one returned."""
    call()  # primes rate counters
    times = []
    n = 0
    for _ in range(ticks):
        t0 = time.process_time()
        n = call()
        times.append((time.process_time() - t0) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.99 * len(times)))], n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ticks", type=int, default=2000)
    ap.add_argument("--gpu-backend", default="auto", choices=("auto", "nvml", "sim", "none"))
    ap.add_argument("--sim-gpus", type=int, default=8)
    args = ap.parse_args()

    gpu = make_gpu_sampler(args.gpu_backend, args.sim_gpus)
    if args.gpu_backend == "auto" and not gpu.state().ok:
        print(f"NVML: {gpu.state().reason}; using {args.sim_gpus} simulated GPUs")
        gpu = make_gpu_sampler("sim", args.sim_gpus)
    samplers: list[Sampler] = [HostSampler(), gpu]
    print(f"{'sampler':28s} {'readings':>8s} {'median ms':>10s} {'p99 ms':>8s}")
    for s in samplers:
        med, p99, n = per_call_ms(lambda s=s: len(s.sample()), args.ticks)
        print(f"{s.name + ' (' + s.state().backend + ')':28s} {n:8d} {med:10.3f} {p99:8.3f}")
    # what the daemon's loop does per tick: every sampler, then the history append (interning, arrays)
    loop = SamplingLoop(samplers, History(3600), 1.0)  # tick() only: the interval is not used
    total, p99, n = per_call_ms(lambda: len(loop.tick().readings), args.ticks)
    print(f"{'loop tick (+ history append)':28s} {n:8d} {total:10.3f} {p99:8.3f}")
    for s in samplers:
        s.close()
    for interval in (1.0, 0.5, 0.2, MIN_INTERVAL_S, 0.05, 0.01, 0.001):
        mark = "  <- dynod's minimum interval_s" if interval == MIN_INTERVAL_S else ""
        print(f"  at interval {interval:g} s: {100 * total / 1000 / interval:7.2f}% of one core{mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

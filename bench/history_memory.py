#!/usr/bin/env python3
"""Memory of dynod's sample history: bytes per stored sample (measured as RSS growth) against the history's own
count (History.bytes_used, what MAX_HISTORY_BYTES bounds), and the window the byte budget keeps at a few
sampling intervals.

Fills a History with samples of the daemon's real samplers' shape (the host sampler and 8 simulated GPUs: the same
series a GPU host without NVML reports; NVML adds counters), values changing every tick as real ones do. RSS is
read from /proc/self/statm before and after, with the ring's objects all alive.

    python bench/history_memory.py [--samples 36000] [--sim-gpus 8]
"""

from __future__ import annotations

import argparse
import gc
import os
import random

from dyno.daemon.history import MAX_HISTORY_BYTES, SAMPLE_OVERHEAD_BYTES, History, Sample
from dyno.daemon.samplers.base import Reading
from dyno.daemon.samplers.gpu import make_gpu_sampler
from dyno.daemon.samplers.host import HostSampler

MIB = 1024 * 1024


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def template(sim_gpus: int) -> tuple[Reading, ...]:
    host, gpu = HostSampler(), make_gpu_sampler("sim", sim_gpus)
    host.sample()  # primes rate counters
    readings = tuple(host.sample()) + tuple(gpu.sample())
    host.close()
    gpu.close()
    return readings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=36_000, help="samples to store (36,000: 1 h at 0.1 s)")
    ap.add_argument("--sim-gpus", type=int, default=8)
    args = ap.parse_args()

    readings = template(args.sim_gpus)
    rng = random.Random(1)
    history = History(args.samples, max_bytes=1 << 62)  # no budget: measure what the samples themselves take
    gc.collect()
    before = rss_bytes()
    for t in range(args.samples):
        history.append(Sample(t, tuple(Reading(r.name, r.value + rng.random(), r.labels) for r in readings)))
    gc.collect()
    grown = rss_bytes() - before
    counted = history.bytes_used
    per_sample_rss = grown / args.samples
    per_sample_counted = counted / args.samples
    print(f"{len(readings)} values per sample, {args.samples} samples stored")
    print(f"RSS growth: {grown / MIB:.1f} MiB = {per_sample_rss:.0f} B/sample")
    print(
        f"History.bytes_used: {counted / MIB:.1f} MiB = {per_sample_counted:.0f} B/sample "
        f"(8 B per value + {SAMPLE_OVERHEAD_BYTES} B overhead); RSS / counted = {grown / counted:.2f}"
    )
    print(f"MAX_HISTORY_BYTES = {MAX_HISTORY_BYTES / MIB:.0f} MiB: window kept (of history_s 3600 s, and at most):")
    per_hour_1s = per_sample_rss * 3600
    for interval in (1.0, 0.5, 0.1):
        fit = MAX_HISTORY_BYTES // per_sample_counted
        hour = 3600 / interval
        print(
            f"  interval_s {interval:g}: an hour is {hour:.0f} samples = {hour * per_sample_rss / MIB:.1f} MiB RSS; "
            f"the budget keeps {fit:.0f} samples = {fit * interval / 3600:.2f} h "
            f"(history_s 3600 {'kept whole' if fit >= hour else f'cut to {fit * interval:.0f} s'})"
        )
    million = per_sample_rss * 1e6 / MIB
    print(
        f"(1 s: {per_hour_1s / MIB:.1f} MiB per hour; 1,000,000 samples, the most history_s allows: {million:.0f} MiB)"
    )
    del history
    gc.collect()

    # The budget at work: history_s / interval_s = 1,000,000 samples, twice the samples the budget holds appended.
    fit = MAX_HISTORY_BYTES // int(per_sample_counted)
    capped = History(1_000_000)
    before = rss_bytes()
    for t in range(2 * fit):
        capped.append(Sample(t, tuple(Reading(r.name, r.value + rng.random(), r.labels) for r in readings)))
    gc.collect()
    print(
        f"capacity 1,000,000, {2 * fit} samples appended: {len(capped)} kept, bytes_used "
        f"{capped.bytes_used / MIB:.1f} MiB (budget {MAX_HISTORY_BYTES / MIB:.0f}), RSS growth "
        f"{(rss_bytes() - before) / MIB:.1f} MiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Daemon overhead: dynod with 8 simulated GPUs sampling every 1 s.

Phase 1 (quiet, --duration-s, default 60): the daemon's CPU time as % of one core (utime+stime from
/proc/<pid>/stat over the window, start-up excluded). Phase 2: GetMetrics latency on loopback (newest sample,
all metrics; and 60 samples) over --calls calls each. Then the peak RSS (VmHWM) of the whole run.
Phase 3: the same daemon's memory with a *full* history ring (3600 samples, the default hour at 1 s): a second
dynod samples every 0.1 s (dynod's minimum interval_s) with --history-s 360, so its ring fills in 6 minutes instead
of an hour; its RSS then is the steady state of a 1 h history.
Targets (issue 2): <= 0.2% of one core, <= 80 MB RSS, GetMetrics p99 <= 5 ms. Prints figures; asserts nothing.

    python bench/daemon_overhead.py [--duration-s 60] [--calls 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from dyno.client import DynoClient  # noqa: E402

from conftest import Dynod  # noqa: E402  (the same real-daemon launcher the integration tests use)

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def latency(client: DynoClient, calls: int, **kw) -> tuple[float, float, int]:
    times = []
    n = 0
    for _ in range(calls):
        t0 = time.perf_counter()
        resp = client.metrics(**kw)
        times.append((time.perf_counter() - t0) * 1000)
        n = sum(len(s.metrics) for s in resp.samples)
    return statistics.median(times), percentile(times, 99), n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration-s", type=float, default=60.0)
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()

    d = Dynod(gpu_backend="sim", sim_gpus=8, interval_s=1.0).start()
    try:
        pid = d.proc.pid
        time.sleep(2.0)  # past start-up
        c0, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(args.duration_s)
        c1, t1 = cpu_seconds(pid), time.monotonic()
        cpu_pct = 100.0 * (c1 - c0) / (t1 - t0)
        rss_quiet = status_kb(pid, "VmRSS") / 1024
        with DynoClient(d.target) as client:
            client.metrics(limit=1)  # warm the channel
            p50_1, p99_1, n1 = latency(client, args.calls, limit=1)
            p50_60, p99_60, n60 = latency(client, max(1, args.calls // 10), limit=60)
        peak = status_kb(pid, "VmHWM") / 1024
    finally:
        d.stop()
        d.cleanup()
    full = Dynod(["--history-s", "360"], gpu_backend="sim", sim_gpus=8, interval_s=0.1, metrics=False).start()
    try:
        with DynoClient(full.target) as client:
            deadline = time.monotonic() + 480
            while client.status().samples_in_history < 3600 and time.monotonic() < deadline:
                time.sleep(1.0)
            n_full = client.status().samples_in_history
            time.sleep(5.0)  # a few more ring turns: steady state
            p50_full, p99_full, _ = latency(client, max(1, args.calls // 4), limit=1)
        rss_full = status_kb(full.proc.pid, "VmRSS") / 1024
        peak_full = status_kb(full.proc.pid, "VmHWM") / 1024
    finally:
        full.stop()
        full.cleanup()

    print(f"dynod, 8 simulated GPUs, 1 s sampling, {args.duration_s:.0f} s quiet window")
    print(f"{'figure':44s} {'measured':>12s} {'target':>10s}  ok")
    rows = [
        ("CPU, % of one core (quiet window)", f"{cpu_pct:.3f}%", "<= 0.2%", cpu_pct <= 0.2),
        ("RSS after quiet window (MB)", f"{rss_quiet:.1f}", "", None),
        ("peak RSS, VmHWM, whole run (MB)", f"{peak:.1f}", "<= 80", peak <= 80),
        (f"GetMetrics newest sample ({n1} values) p50 ms", f"{p50_1:.2f}", "", None),
        (f"GetMetrics newest sample ({n1} values) p99 ms", f"{p99_1:.2f}", "<= 5", p99_1 <= 5),
        (f"GetMetrics 60 samples ({n60} values) p50 ms", f"{p50_60:.2f}", "", None),
        (f"GetMetrics 60 samples ({n60} values) p99 ms", f"{p99_60:.2f}", "", None),
        (f"RSS with a full ring ({n_full} samples) (MB)", f"{rss_full:.1f}", "<= 80", rss_full <= 80),
        ("peak RSS, full-ring run (MB)", f"{peak_full:.1f}", "<= 80", peak_full <= 80),
        ("GetMetrics newest sample, full ring, p99 ms", f"{p99_full:.2f}", "<= 5", p99_full <= 5),
    ]
    for name, value, target, ok in rows:
        print(f"{name:44s} {value:>12s} {target:>10s}  {'' if ok is None else ('yes' if ok else 'NO')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

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

`--idle` instead: unscraped dynod, 8 simulated GPUs and `--gpu-backend none`, each `--rounds` times alternately,
CPU over --duration-s from utime+stime (10 ms ticks) and from the scheduler's own run time (/proc/PID/task/*/schedstat,
nanoseconds), with a per-thread breakdown (run time, wake-ups per second) of the last round. `--scraped`: dynod (8
simulated GPUs, 1 s sampling) and node_exporter (`prometheus-node-exporter`, Debian) side by side, both scraped every
second the way Prometheus scrapes (OpenMetrics preferred, gzip), over --rounds windows of --duration-s.

    python bench/daemon_overhead.py --idle [--duration-s 60] [--rounds 2]
    python bench/daemon_overhead.py --scraped [--duration-s 60] [--rounds 2]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from bench_common import proc_cpu_s  # noqa: E402

from dyno.client import DynoClient  # noqa: E402

from conftest import Dynod, free_port  # noqa: E402  (the same real-daemon launcher the integration tests use)

# what Prometheus 2.x sends (scrape.go's acceptHeader)
SCRAPE_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")


def threads(pid: int) -> dict[str, tuple[str, int, int]]:
    """tid -> (comm, run time ns, voluntary context switches) of every thread of `pid` (schedstat: exact, where
    utime/stime are sampled at the 10 ms tick)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            run_ns = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
            status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except OSError:
            continue  # ended meanwhile
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        out[tid] = (fields["Name"].strip(), run_ns, int(fields["voluntary_ctxt_switches"]))
    return out


class Window:
    """CPU of one process over a window: utime+stime and scheduler run time, both as % of one core."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.t0, self.c0, self.th0 = time.monotonic(), proc_cpu_s(pid), threads(pid)

    def close(self) -> tuple[float, float, list[tuple[str, str, float, float]]]:
        """(utime+stime %, run time %, per thread (tid, comm, run %, wake-ups/s) busiest first)"""
        dt = time.monotonic() - self.t0
        ticks_pct = 100.0 * (proc_cpu_s(self.pid) - self.c0) / dt
        th1 = threads(self.pid)
        rows = []
        for tid, (comm, run_ns, switches) in th1.items():
            _, run0, switches0 = self.th0.get(tid, (comm, 0, 0))
            rows.append((tid, comm, 100.0 * (run_ns - run0) / 1e9 / dt, (switches - switches0) / dt))
        rows.sort(key=lambda r: -r[2])
        return ticks_pct, sum(r[2] for r in rows), rows


def idle(args: argparse.Namespace) -> None:
    results: dict[str, list[tuple[float, float]]] = {"8 simulated GPUs": [], "--gpu-backend none": []}
    breakdown: dict[str, list[tuple[str, str, float, float]]] = {}
    for _ in range(args.rounds):
        for label, kw in (
            ("8 simulated GPUs", {"gpu_backend": "sim", "sim_gpus": 8}),
            ("--gpu-backend none", {"gpu_backend": "none"}),
        ):
            d = Dynod(interval_s=1.0, **kw).start()  # type: ignore[arg-type]
            try:
                time.sleep(3.0)  # past start-up
                w = Window(d.proc.pid)
                time.sleep(args.duration_s)
                ticks_pct, run_pct, rows = w.close()
            finally:
                d.stop()
                d.cleanup()
            results[label].append((ticks_pct, run_pct))
            breakdown[label] = rows
    print(f"dynod unscraped, 1 s sampling, {args.rounds} x {args.duration_s:.0f} s each, alternating")
    print(f"{'daemon':22s} {'utime+stime % per round':>28s} {'run time % per round':>26s}")
    for label, values in results.items():
        print(
            f"{label:22s} {' '.join(f'{t:.3f}' for t, _ in values):>28s} {' '.join(f'{r:.3f}' for _, r in values):>26s}"
        )
    for label, rows in breakdown.items():
        print(f"\nthreads of the last round, {label} (tid, name, run time %, voluntary wake-ups/s):")
        for tid, comm, pct, wakeups in rows:
            if pct > 0.0005:
                print(f"  {tid:>8s} {comm:16s} {pct:7.4f}% {wakeups:6.1f}/s")


def _scraper(urls: list[str], stop: threading.Event, sizes: dict[str, int]) -> None:
    next_t = time.monotonic()
    while not stop.is_set():
        for url in urls:
            req = urllib.request.Request(url, headers={"Accept": SCRAPE_ACCEPT, "Accept-Encoding": "gzip"})
            with urllib.request.urlopen(req, timeout=5) as r:
                body = r.read()
                sizes[url] = len(gzip.decompress(body) if r.headers.get("Content-Encoding") == "gzip" else body)
        next_t += 1.0
        stop.wait(max(0.0, next_t - time.monotonic()))


def scraped(args: argparse.Namespace) -> None:
    if NODE_EXPORTER is None:
        print("no node_exporter (apt install prometheus-node-exporter)")
        return
    d = Dynod(gpu_backend="sim", sim_gpus=8, interval_s=1.0).start()
    ne_port = free_port()
    ne = subprocess.Popen(
        [NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{ne_port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    urls = [d.metrics_url, f"http://127.0.0.1:{ne_port}/metrics"]
    rows = []
    sizes: dict[str, int] = {}
    try:
        time.sleep(3.0)
        stop = threading.Event()
        scraper = threading.Thread(target=_scraper, args=(urls, stop, sizes), daemon=True)
        scraper.start()
        time.sleep(3.0)  # both warmed by a few scrapes
        for _ in range(args.rounds):
            wd, wn = Window(d.proc.pid), Window(ne.pid)
            time.sleep(args.duration_s)
            rows.append((wd.close()[:2], wn.close()[:2]))
        stop.set()
        scraper.join(10)
    finally:
        d.stop()
        d.cleanup()
        ne.terminate()
        ne.wait(10)
    version = subprocess.run([NODE_EXPORTER, "--version"], capture_output=True, text=True)
    print(f"scraped every 1 s side by side, {args.rounds} windows of {args.duration_s:.0f} s")
    print(f"node_exporter: {(version.stdout or version.stderr).splitlines()[0]}")
    print(f"exposition sizes: dynod {sizes.get(urls[0], 0)} bytes, node_exporter {sizes.get(urls[1], 0)} bytes")
    print(
        f"{'window':8s} {'dynod ticks %':>14s} {'dynod run %':>12s} {'node_exp ticks %':>17s} {'node_exp run %':>15s}"
    )
    for i, ((dt, dr), (nt, nr)) in enumerate(rows, 1):
        print(f"{i:<8d} {dt:14.3f} {dr:12.3f} {nt:17.3f} {nr:15.3f}")
    med = [statistics.median(v) for v in zip(*[(dt, dr, nt, nr) for (dt, dr), (nt, nr) in rows], strict=True)]
    print(f"{'median':8s} {med[0]:14.3f} {med[1]:12.3f} {med[2]:17.3f} {med[3]:15.3f}")


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
    ap.add_argument("--idle", action="store_true", help="only the unscraped CPU figures, per thread")
    ap.add_argument("--scraped", action="store_true", help="only dynod beside node_exporter, scraped every 1 s")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    if args.idle or args.scraped:
        if args.idle:
            idle(args)
        if args.scraped:
            scraped(args)
        return 0

    d = Dynod(gpu_backend="sim", sim_gpus=8, interval_s=1.0).start()
    try:
        pid = d.proc.pid
        time.sleep(2.0)  # past start-up
        c0, t0 = proc_cpu_s(pid), time.monotonic()
        time.sleep(args.duration_s)
        c1, t1 = proc_cpu_s(pid), time.monotonic()
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

#!/usr/bin/env python3
"""dynod's memory over a long run of job accounting: a real dynod (sim GPUs, 1 s sampling, job records flushed to
its SQLite file every 60 s) holding registered agent trainers (scale/agents.py: a real `sleep` process each, Register
and an open Watch stream), its RSS and CPU time read from /proc every --every-s for --minutes of wall time.

    nice -n 19 python bench/job_accounting_rss.py                 # 30 minutes, 64 trainers, 8 GPUs, every 60 s
    python bench/job_accounting_rss.py --minutes 2 --every-s 10   # a quick look

Prints one line per reading (minute, registered processes, RSS, CPU share since the last reading), then the first,
last and largest RSS and the change from the first reading to the last. Asserts nothing.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
from bench_common import env_without_job_ids, proc_cpu_s
from scale.agents import hold_agents
from soak.dynod import Dynod

from dyno.v1 import dyno_pb2, dyno_pb2_grpc


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0, help="wall time of the run (default 30)")
    ap.add_argument("--every-s", type=float, default=60.0, help="seconds between readings (default 60)")
    ap.add_argument("--trainers", type=int, default=64, help="registered trainers (default 64)")
    ap.add_argument("--role-args", nargs=4, help=argparse.SUPPRESS)  # the trainers' own process
    args = ap.parse_args(argv)
    if args.role_args:
        a = args.role_args
        hold_agents(Path(a[0]), int(a[1]), Path(a[2]), Path(a[3]))
        return 0
    root = Path(tempfile.mkdtemp(prefix="dyno-acct-rss-", dir="/tmp"))
    d = Dynod(root, interval_s=1.0, extra=("job_flush_s = 60",))  # Dynod's config has 8 sim GPUs
    d.start()
    stop_file = root / "stop"
    status_file = root / "agents.json"
    agents = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--role-args",
            str(d.agent_socket),
            str(args.trainers),
            str(status_file),
            str(stop_file),
        ],
        env=env_without_job_ids(),
    )
    channel = grpc.insecure_channel(d.target)
    stub = dyno_pb2_grpc.DynoStub(channel)
    try:
        deadline = time.monotonic() + 120
        registered = 0
        while registered < args.trainers and time.monotonic() < deadline:
            time.sleep(1.0)
            registered = stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=30).registered_processes
        print(f"dynod pid {d.pid}: {registered} registered processes, 8 simulated GPUs, 1 s sampling", flush=True)
        start = time.monotonic()
        end = start + args.minutes * 60
        series: list[int] = []
        last_cpu, last_t = proc_cpu_s(d.pid), start
        print("minute  registered  RSS KiB  CPU % of a core since the last reading", flush=True)
        while True:
            now = time.monotonic()
            rss, cpu = _rss_kib(d.pid), proc_cpu_s(d.pid)
            registered = stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=30).registered_processes
            share = 100 * (cpu - last_cpu) / (now - last_t) if now > last_t else 0.0
            last_cpu, last_t = cpu, now
            series.append(rss)
            print(f"{(now - start) / 60:6.1f}  {registered:10d}  {rss:7d}  {share:6.2f}", flush=True)
            if now >= end:
                break
            time.sleep(min(args.every_s, max(0.0, end - now)))
        jobs = stub.ListJobs(dyno_pb2.ListJobsRequest(running_only=True), timeout=30)
        store = stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=30).job_store
        print(f"running job records: {len(jobs.jobs)}; job store: {store}")
        print(
            f"RSS first {series[0]} KiB, last {series[-1]} KiB, max {max(series)} KiB, min {min(series)} KiB; "
            f"last - first {series[-1] - series[0]:+d} KiB over {len(series) - 1} readings"
        )
    finally:
        channel.close()
        stop_file.touch()
        try:
            agents.wait(60)
        except subprocess.TimeoutExpired:
            agents.kill()
        d.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

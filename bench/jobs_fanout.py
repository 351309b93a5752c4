"""`dyno-cli jobs` across many daemons holding many job records: the fan-out of ListJobs (every page of every host)
and the join into one row per job, as the command does it.

    python bench/jobs_fanout.py                      # 256 fake hosts x 10,000 records, 3 repeats
    python bench/jobs_fanout.py --hosts 64 --jobs 1000
    python bench/jobs_fanout.py --records            # also the record form (the command's path before columns)
    python bench/jobs_fanout.py --opportunities      # dyno-cli opportunities: 256 hosts x 2,000 analysed records

The hosts are fake Dyno servers (dyno.daemon.fake_server) in 4 helper processes, answering ListJobs with the same
10,000 ended records each (sent pre-encoded: columnar pages of 10,000 rows as `dyno-cli jobs` asks, record pages of
1000), so the figure is the client's cost plus the loopback transfer on one machine that also runs the servers.
Prints, per repeat, the time of Cluster.list_job_pages (fan-out, all pages) and of jobs_columns.from_pages (the
join), and of the whole `dyno-cli jobs --json` process; with --records, also Cluster.list_jobs of records and
jobs_table.from_records. Target: the whole command < 2 s.

With --opportunities (records per host 2,000 unless --jobs says otherwise) every record has a latest analysis as
dyno.daemon.fake_server.fake_analysis makes it (3 rules, 8 ranks; every 10th none, every 50th FAILED), and only the
whole `dyno-cli opportunities --json` process is timed: wall time, CPU time and its peak RSS. Target: < 3 s and
< 500 MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import bytecode_env, dyno_cli

from dyno.client.cluster import Cluster
from dyno.client.hosts import Host
from dyno.client.jobs_columns import from_pages
from dyno.client.jobs_table import from_records
from dyno.gc_pause import gc_paused
from dyno.v1 import dyno_pb2


def _serve(count: int, jobs: int, analyses: bool) -> int:
    from dyno.daemon.fake_server import start_fake_servers

    servers = start_fake_servers(count, jobs=jobs, analyses=analyses)
    print(json.dumps([s.port for s in servers]), flush=True)
    sys.stdin.read()  # until the parent closes it
    for s in servers:
        s.server.stop(0)
    return 0


def _children_cpu() -> float:
    """User + system CPU seconds of the finished child processes (the command's own work, whatever the load)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _opportunities(hostfile: str, repeats: int) -> None:
    """The whole `dyno-cli opportunities --json` process, `repeats` times after one untimed run (which fills the
    bytecode cache and the servers' pages): wall, CPU and peak RSS of each run (os.wait4: that process's own)."""
    with tempfile.TemporaryDirectory(prefix="opp-bench-") as cache:
        env = bytecode_env(cache)
        argv = [*dyno_cli(), "opportunities", "--hostfile", hostfile, "--json", "--timeout-s", "300"]
        walls, cpus, rss = [], [], []
        for i in range(repeats + 1):
            with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
                t0 = time.perf_counter()
                proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
                _, status, usage = os.wait4(proc.pid, 0)
                wall = time.perf_counter() - t0
                proc.returncode = os.waitstatus_to_exitcode(status)
                out.seek(0)
                doc = json.loads(out.read() or b"{}") if proc.returncode == 0 else {}
                err.seek(0)
                said = err.read().decode(errors="replace").strip()[-300:]
            cpu, peak = usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024
            rules = [(r["rule"], round(r["recoverable_gpu_hours"], 1)) for r in doc.get("rules", [])]
            run = "warm-up" if i == 0 else f"repeat {i}"
            print(
                f"{run}: dyno-cli opportunities --json {wall:.2f} s, CPU {cpu:.2f} s, "
                f"peak RSS {peak:.0f} MiB (exit {proc.returncode}, {doc.get('totals', {}).get('jobs', 0)} jobs, "
                f"rules {rules}){' stderr: ' + said if said else ''}; load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            if i:
                walls.append(wall)
                cpus.append(cpu)
                rss.append(peak)
    print(
        f"median: whole command {statistics.median(walls):.2f} s (target < 3 s), CPU {statistics.median(cpus):.2f} s, "
        f"peak RSS {statistics.median(rss):.0f} MiB (target < 500 MiB); load average {os.getloadavg()[0]:.1f}"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=256)
    p.add_argument("--jobs", type=int, default=0, help="records per host (default 10,000; 2,000 --opportunities)")
    p.add_argument("--groups", type=int, default=4, help="helper processes serving the fake hosts")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--records", action="store_true", help="also time the record form's fan-out and join")
    p.add_argument(
        "--opportunities", action="store_true", help="time dyno-cli opportunities over analysed records instead"
    )
    p.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.jobs = args.jobs or (2000 if args.opportunities else 10_000)
    if args.serve:
        return _serve(args.serve, args.jobs, args.opportunities)
    sizes = [args.hosts // args.groups + (1 if i < args.hosts % args.groups else 0) for i in range(args.groups)]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--serve", str(n), "--jobs", str(args.jobs)]
            + (["--opportunities"] if args.opportunities else []),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in sizes
        if n
    ]
    ports = [port for proc in procs for port in json.loads(proc.stdout.readline())]  # type: ignore[union-attr]
    hosts = [Host("127.0.0.1", port) for port in ports]
    with tempfile.NamedTemporaryFile("w", suffix=".hosts", delete=False) as f:
        f.write("\n".join(f"127.0.0.1:{port}" for port in ports) + "\n")
        hostfile = f.name
    print(f"{len(hosts)} hosts x {args.jobs} job records; cpus={os.cpu_count()}")
    if args.opportunities:
        try:
            _opportunities(hostfile, args.repeats)
        finally:
            _stop(procs, hostfile)
        return 0
    fan, join, cli, cli_cpu, rec_fan, rec_join = [], [], [], [], [], []
    columnar = dyno_pb2.ListJobsRequest(columnar=True)
    try:
        # the first pass builds the servers' pages (once per helper process): not timed
        with Cluster(hosts, deadline_s=120) as cluster:
            cluster.list_job_pages(columnar)
            if args.records:
                cluster.list_jobs(dyno_pb2.ListJobsRequest())
        for i in range(args.repeats):
            line = f"repeat {i + 1}:"
            if args.records:
                with gc_paused(), Cluster(hosts, deadline_s=120) as cluster:
                    t0 = time.perf_counter()
                    results = cluster.list_jobs(dyno_pb2.ListJobsRequest())
                    t1 = time.perf_counter()
                    rows = from_records((str(r.host), j) for r in results if r.ok and r.value for j in r.value.jobs)
                    t2 = time.perf_counter()
                del results
                rec_fan.append(t1 - t0)
                rec_join.append(t2 - t1)
                line += f" records: list_jobs {t1 - t0:.2f} s, join {t2 - t1:.2f} s ({len(rows)} jobs);"
            with gc_paused(), Cluster(hosts, deadline_s=120) as cluster:  # as the command does
                t0 = time.perf_counter()
                pages = cluster.list_job_pages(columnar)
                t1 = time.perf_counter()
                rows = from_pages((str(r.host), page) for r in pages if r.ok and r.value for page in r.value)
                t2 = time.perf_counter()
            failed = sum(1 for r in pages if not r.ok)
            count = sum(len(page.columns.job_id) for r in pages if r.ok and r.value for page in r.value)
            del pages
            cpu0 = _children_cpu()
            t4 = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "dyno.client", "jobs", "--hostfile", hostfile, "--json", "--timeout-s", "120"],
                capture_output=True,
                text=True,
            )
            t5 = time.perf_counter()
            cli_cpu.append(_children_cpu() - cpu0)
            fan.append(t1 - t0)
            join.append(t2 - t1)
            cli.append(t5 - t4)
            listed = len(json.loads(done.stdout)["jobs"]) if done.returncode == 0 else 0
            print(
                f"{line} columns: list_job_pages {t1 - t0:.2f} s ({count} records, {failed} failed hosts), "
                f"join {t2 - t1:.2f} s ({len(rows)} jobs), dyno-cli jobs --json {t5 - t4:.2f} s, "
                f"CPU {cli_cpu[-1]:.2f} s (exit {done.returncode}, {listed} jobs)",
                flush=True,
            )
    finally:
        _stop(procs, hostfile)
    if args.records:
        print(
            f"median, records: list_jobs {statistics.median(rec_fan):.2f} s, join {statistics.median(rec_join):.2f} s"
        )
    print(
        f"median, columns: list_job_pages {statistics.median(fan):.2f} s, join {statistics.median(join):.2f} s, "
        f"whole command {statistics.median(cli):.2f} s (target < 2 s; its CPU {statistics.median(cli_cpu):.2f} s); "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    return 0


def _stop(procs: list[subprocess.Popen[str]], hostfile: str) -> None:
    for proc in procs:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(30)
    os.unlink(hostfile)


if __name__ == "__main__":
    sys.exit(main())

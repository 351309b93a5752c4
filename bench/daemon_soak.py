#!/usr/bin/env python3
"""Daemon soak: weeks of a busy host's traffic, compressed into minutes, against one real dynod; does anything grow?

Starts `python -m dyno.daemon` with a temp TOML config (sim GPU backend, loopback, free ports, its own agent socket,
kineto socket dir, state and trace dirs, short trace retention) and drives it with, at once:

- fake agent trainers (one real short-lived `sleep` process each, for a live pid), speaking the Agent service's
  real wire protocol on the Unix socket: Register, a Watch stream, trace files written and ReportTrace; they end
  in every way a trainer does: a clean stream cancel, the process killed before its channel closes, a pid that
  registers again as another job while its old stream is still open (pid reuse before garbage collection),
  registrations that never open a Watch stream, and a death mid-trace that leaves a `.tmp` file;
- fake libkineto trainers: a fleet process forks short-lived children, each binding its own
  `dynoconfigclient<uuid>` socket in the kineto socket dir (never unlinked, as libkineto does), sending ctxt and
  req polls with the kernel's credentials, writing the trace file a config asks for (or crashing mid-write, or
  exiting before it writes), and exiting (a kineto pid is reused only when the host's pid space wraps: pid_max);
- a handful of real ones: `dyno.client.agent` processes and (unless --quick) torch processes with
  KINETO_USE_DAEMON=1;
- a tracer: StartTrace for registered jobs, GetTrace polls until finished, FetchTraceFile of the done files
  (some dropped after the first chunk), CancelTrace, and retention deleting the old trace folders;
- CLI-style unary calls (GetStatus, GetVersion, ListProcesses, GetMetrics, health, unknown trace ids; many on a
  fresh channel, as each dyno-cli run opens one), StreamMetrics sessions dropped mid-stream;
- /metrics scrapes, and connections that send half a request and go away.

dynod's RSS, open fds, threads, registered processes, trace folders, kineto socket files and the dyno_* gauges are
sampled every few seconds; the table shows them at start, after warm-up, in the middle and at the end, with the
growth per 1000 operations from warm-up to the end and over the second half (a leak keeps growing in the second
half; a cache or pool filling up does not). Prints figures; asserts nothing.

`--objects` runs dynod's own main() under a small wrapper that counts its live objects by type on SIGUSR1 and
prints the types that grew (a leak of a few hundred bytes per trainer is lost in RSS noise; a growing count is not).
`--series-churn HOURS` measures something else, in-process: the history's series table on a node whose network
interfaces come and go under new names.

    python bench/daemon_soak.py [--minutes 3] [--quick] [--objects] [--keep]
    python bench/daemon_soak.py --series-churn 10
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from bench_common import env_without_job_ids
from soak.clients import cli, scraper, tracer, traces_known
from soak.dynod import Dynod
from soak.figures import Figures, measure, objects_table, table
from soak.kineto_fleet import kineto_fleet
from soak.load import Load
from soak.series_churn import series_churn
from soak.trainers import fake_agent, real_agents, real_kineto


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=3.0, help="how long to drive dynod (default 3)")
    ap.add_argument("--quick", action="store_true", help="a 40 s run with less load (a smoke test of the bench)")
    ap.add_argument("--agents", type=int, default=6, help="fake agent trainers at once (default 6)")
    ap.add_argument("--kineto", type=int, default=8, help="fake libkineto trainers at once (default 8)")
    ap.add_argument("--sample-s", type=float, default=3.0, help="seconds between samples of dynod (default 3)")
    ap.add_argument(
        "--objects",
        action="store_true",
        help="run dynod's main() under a wrapper that counts its objects by type, and show the types that grew",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (dynod's log) after the run")
    ap.add_argument(
        "--series-churn",
        type=float,
        metavar="HOURS",
        help="instead of the soak: the history's series table over HOURS of interfaces coming and going (in-process)",
    )
    ap.add_argument("--kineto-fleet", nargs=4, metavar=("DIR", "OPS", "N", "STOP"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.kineto_fleet:
        sock_dir, ops, n, stop = args.kineto_fleet
        kineto_fleet(Path(sock_dir), Path(ops), int(n), Path(stop))
        return 0
    if args.series_churn:
        series_churn(args.series_churn)
        return 0
    return soak(args)


def soak(args: argparse.Namespace) -> int:
    """One soak run: dynod started, driven for the run's length, sampled, then stopped; prints the report."""
    seconds = 40.0 if args.quick else args.minutes * 60
    agents, kineto = (3, 4) if args.quick else (args.agents, args.kineto)

    root = Path(tempfile.mkdtemp(prefix="dyno-soak-", dir="/tmp"))
    d = Dynod(root)
    d.start(objects=args.objects)
    load = Load(d)
    stop_file = root / "stop"
    fleet = subprocess.Popen(
        [sys.executable, __file__, "--kineto-fleet", str(d.kineto_dir), str(load.kineto_ops_file), str(kineto)]
        + [str(stop_file)],
        env=env_without_job_ids(),
    )
    started = time.monotonic()
    samples = [measure(d, started, 0)]
    threads = _drivers(load, agents, args.quick)
    for t in threads:
        t.start()
    print(f"dynod pid {d.pid} grpc {d.target} metrics :{d.metrics_port}; driving it for {seconds:.0f} s", flush=True)
    warm_at = started + min(30.0, seconds * 0.15)
    warm: Figures | None = None
    objects_warm: Counter[str] = Counter()
    next_report = started + 30
    while time.monotonic() < started + seconds:
        time.sleep(args.sample_s)
        samples.append(measure(d, started, load.total()))
        if warm is None and time.monotonic() >= warm_at:
            warm = samples[-1]
            objects_warm = d.objects() if args.objects else Counter()
        if time.monotonic() >= next_report:
            f = samples[-1]
            print(f"  {f.at_s:5.0f} s  {f.ops:7d} ops  " + "  ".join(f"{k}={v:.0f}" for k, v in f.values.items()))
            next_report += 30
    load.stop.set()
    stop_file.touch()
    fleet.wait(60)
    for t in threads:
        t.join(15)
    time.sleep(8)  # a housekeeping pass (every 5 s when idle) drops the last exited trainers
    samples.append(measure(d, started, load.total()))  # after the load: what stays (orphaned streams still open)
    objects_end = d.objects() if args.objects else Counter()
    for channel, stream in load.orphans:
        stream.cancel()
        channel.close()
    time.sleep(2)
    samples.append(measure(d, started, load.total()))  # the orphaned connections closed
    assert warm is not None
    print()
    print(f"dynod soak: {seconds:.0f} s, {samples[-1].ops} operations ({(samples[-1].ops) / seconds:.0f}/s)")
    _print_operations(load)
    print()
    print(table(samples[:-1], warm, samples[-1]))
    if args.objects:
        print(objects_table(objects_warm, objects_end, max(1, samples[-1].ops - warm.ops)))
    known = traces_known(d, load.trace_ids)
    print(
        f"trace table: {known} of {len(load.trace_ids)} started trace ids still answer GetTrace "
        f"(retention forgets the others with their folders); {samples[-1].values['trace folders']:.0f} folders on disk"
    )
    rc = d.stop()
    text = d.log.read_text()
    print()
    print(
        f"dynod exit {rc}; log lines: {text.count(chr(10))}, WARNING {text.count(' WARNING ')}, "
        f"ERROR {text.count(' ERROR ')}, tracebacks {text.count('Traceback')}"
    )
    if args.keep:
        print(f"kept {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def _drivers(load: Load, agents: int, quick: bool) -> list[threading.Thread]:
    """The load's driver threads (not started): fake agents, a tracer, two CLIs, a scraper, real trainers."""
    threads = [
        threading.Thread(target=fake_agent, args=(load, i, random.Random(i)), daemon=True) for i in range(agents)
    ]
    threads += [
        threading.Thread(target=tracer, args=(load, random.Random(100)), daemon=True),
        threading.Thread(target=cli, args=(load, random.Random(101)), daemon=True),
        threading.Thread(target=cli, args=(load, random.Random(102)), daemon=True),
        threading.Thread(target=scraper, args=(load, random.Random(103)), daemon=True),
        threading.Thread(target=real_agents, args=(load, 10.0 if quick else 6.0, sys.executable), daemon=True),
    ]
    if not quick:
        threads.append(threading.Thread(target=real_kineto, args=(load, 3, sys.executable), daemon=True))
    return threads


def _print_operations(load: Load) -> None:
    with load.lock:
        ops = dict(load.ops)
        errors = dict(load.errors)
    try:
        ops["kineto trainer"] = int(load.kineto_ops_file.read_text())
    except (OSError, ValueError):
        pass
    print("operations: " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items())))
    print("errors: " + (", ".join(f"{k} {v}" for k, v in sorted(errors.items())) or "none"))


if __name__ == "__main__":
    sys.exit(main())

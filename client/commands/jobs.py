"""dyno-cli jobs: the fleet's jobs ranked by wasted GPU-hours, from the daemons' job records (fan-out) or from a
Prometheus server's job series (--prometheus)."""

from __future__ import annotations

import argparse
import sys
import time

from dyno.argtypes import job_id as job_id_arg
from dyno.client.commands._common import print_json, print_out, terminal_width
from dyno.client.commands._hosts import FANOUT_EXIT_CODES, add_host_command, fanout_exit_code, print_failures
from dyno.client.commands._job_records import gather_records
from dyno.client.commands._since import parse_since
from dyno.gc_pause import gc_paused

# protobuf (the records and the table built from them) and grpc are imported by the functions that run the command:
# `jobs --help` needs neither

__all__ = ["register", "parse_since"]


def register(sub: argparse._SubParsersAction) -> None:
    p = add_host_command(
        sub,
        "jobs",
        "One row per job across all its hosts, from each daemon's job records: hosts, GPUs, start, "
        "duration, GPU-hours held, busy % (NVML utilization), SM-active % (where every host had GPM), and the wasted "
        "GPU-hours = GPU-hours x (1 - SM-active or busy fraction; the column says which), most wasted first.",
        FANOUT_EXIT_CODES,
    )
    p.add_argument(
        "--since", type=parse_since, default=parse_since("7d"), help="jobs seen in this last period (default 7d)"
    )
    p.add_argument("--running", action="store_true", help="only jobs still running")
    p.add_argument("--user", default="", help="only jobs of this user")
    p.add_argument("--job-id", type=job_id_arg, help="only this job")
    p.add_argument(
        "--prometheus",
        metavar="URL",
        help="compute the table from this Prometheus server's job series (PromQL) instead of asking the daemons: "
        "for fleets too large to fan out to",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def _run_prometheus(args: argparse.Namespace) -> int:
    from dyno.client.jobs_prometheus import PrometheusError, records_from_prometheus
    from dyno.client.jobs_table import from_records, render, to_json

    try:
        records = records_from_prometheus(
            args.prometheus,
            args.since,
            job_id=args.job_id or "",
            user=args.user,
            running_only=args.running,
            timeout_s=args.call_timeout_s,
        )
    except PrometheusError as e:
        print(f"dyno-cli jobs: error: {e}", file=sys.stderr)
        return 1
    rows = from_records(records)
    if args.json:
        print_json({"jobs": to_json(rows), "failed_hosts": [], "store_problems": [], "source": args.prometheus})
    elif rows:
        print_out(render(rows, terminal_width()))
    else:
        print_out(f"no job series in {args.prometheus} in the last {args.since / 86400:g} days")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.prometheus:
        return _run_prometheus(args)
    from dyno.client.jobs_columns import from_pages
    from dyno.client.jobs_table import render, to_json
    from dyno.v1 import dyno_pb2

    since_ms = int((time.time() - args.since) * 1000)
    request = dyno_pb2.ListJobsRequest(
        since_ms=since_ms, user=args.user, job_id=args.job_id or "", running_only=args.running, columnar=True
    )
    with gc_paused():
        gathered = gather_records(args, request)
        rows = from_pages(gathered.pages())
    results, problems = gathered.results, gathered.problems
    if args.json:
        print_json(
            {
                "jobs": to_json(rows),
                "failed_hosts": [{"host": str(r.host), "error": r.error} for r in results if not r.ok],
                "store_problems": problems,
            }
        )
    elif rows:
        print_out(render(rows, terminal_width()))
    else:
        answered = sum(1 for r in results if r.ok)
        if answered:
            print_out(f"no jobs on {answered} host(s) in the last {args.since / 86400:g} days")
    for p in problems:
        print(f"dyno-cli jobs: job database of {p} (running jobs only)", file=sys.stderr)
    print_failures(results)
    return fanout_exit_code(results)

"""dyno-cli opportunities: for each antipattern rule, the GPU-hours the fleet would recover by fixing it (the jobs'
GPU-hours x the rule's share of time lost in their latest host-side analyses), from the daemons' job records
(fan-out, as `dyno-cli jobs`) or from a Prometheus server's series (--prometheus)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from dyno import exit_codes
from dyno.argtypes import nonempty_path, number
from dyno.client.commands._common import print_json, print_out, terminal_width
from dyno.client.commands._hosts import FANOUT_EXIT_CODES, add_host_command, fanout_exit_code, print_failures
from dyno.client.commands._since import parse_since
from dyno.client.commands._usage import usage_error

# What the command runs with (protobuf, the ranking, the renderers) is imported by run(): --help loads none of it.
if TYPE_CHECKING:
    from dyno.client.opportunities.model import Opportunities

__all__ = ["register"]

_NAME = "dyno-cli opportunities"
_DEFAULT_TOP = 5
_EXIT_CODES = {
    **FANOUT_EXIT_CODES,
    exit_codes.FAILURE: "no host answered, Prometheus could not be asked, or --html could not be written",
    exit_codes.USAGE: "usage (bad options, a malformed host list or --prometheus URL, a bad --since)",
}


def register(sub: argparse._SubParsersAction) -> None:
    p = add_host_command(
        sub,
        "opportunities",
        description="For each antipattern rule, the GPU-hours the fleet would recover = the sum over (job, host) of "
        "the job's GPU-hours on the host x the rule's share of time lost in the job's latest finished analysis there "
        "(dynod analyses every trace it takes). Ranked, each with its top jobs, its fix, and the jobs and users it "
        "touches. GPU-hours without a finished analysis are shown apart: unknown, not zero (docs/OPPORTUNITIES.md).",
        codes=_EXIT_CODES,
    )
    p.add_argument(
        "--since", type=parse_since, default=parse_since("7d"), help="jobs seen in this last period (default 7d)"
    )
    p.add_argument("--user", default="", help="only jobs of this user")
    p.add_argument(
        "--top",
        type=number(int, ge=1, le=10000),
        default=_DEFAULT_TOP,
        metavar="N",
        help=f"jobs listed per rule and never-analysed jobs listed (default {_DEFAULT_TOP}; sums cover all)",
    )
    p.add_argument(
        "--prometheus",
        metavar="URL",
        help="rank from this Prometheus server's job and analysis series (PromQL) instead of asking the daemons",
    )
    p.add_argument("--json", action="store_true", help="print a JSON document (schema dyno.opportunities) instead")
    p.add_argument("--html", type=nonempty_path, metavar="FILE", help="also write an offline HTML page with a chart")
    p.set_defaults(func=run)


def _prometheus(args: argparse.Namespace) -> Opportunities | None:
    from dyno.client.jobs_prometheus import PrometheusError
    from dyno.client.opportunities.prometheus import from_prometheus
    from dyno.client.opportunities.ranking import rank

    try:
        inputs = from_prometheus(args.prometheus, args.since, user=args.user, timeout_s=args.call_timeout_s)
    except PrometheusError as e:
        print(f"{_NAME}: error: {e}", file=sys.stderr)
        return None
    return rank(inputs, since_s=args.since, source=args.prometheus, top=args.top)


def run(args: argparse.Namespace) -> int:
    from dyno.client.commands._job_records import gather_records
    from dyno.client.commands._trace_output import check_html
    from dyno.client.jobs_prometheus import PrometheusError, check_url
    from dyno.client.opportunities.column_ranking import rank_pages
    from dyno.client.opportunities.html import render_html
    from dyno.client.opportunities.jsondoc import to_json
    from dyno.client.opportunities.text import render
    from dyno.client.trace.manifest import write_text_atomic
    from dyno.gc_pause import gc_paused
    from dyno.v1 import dyno_pb2

    check_html(args.html)
    if args.prometheus:
        try:
            check_url(args.prometheus)
        except PrometheusError as e:
            usage_error(str(e))
        answer = _prometheus(args)
        if answer is None:
            return exit_codes.FAILURE
        code, results = exit_codes.OK, []
    else:
        # columns with every rule of each latest analysis (an older dynod's records are made the same columns)
        since_ms = int((time.time() - args.since) * 1000)
        request = dyno_pb2.ListJobsRequest(since_ms=since_ms, user=args.user, columnar=True, analysis_rules=True)
        with gc_paused():  # as jobs' gather and join: a fleet's answer is many objects, none garbage yet
            gathered = gather_records(args, request)  # a host with malformed columns: a failed one
            results = gathered.results
            failed = [(str(r.host), f"{r.error_type}: {r.error}") for r in results if not r.ok]
            answer = rank_pages(
                gathered.take_pages(),
                since_s=args.since,
                source="daemons",
                top=args.top,
                failed_hosts=failed,
                store_problems=gathered.problems,
            )
        for problem in gathered.problems:
            print(f"{_NAME}: job database of {problem} (running jobs only)", file=sys.stderr)
        code = fanout_exit_code(results)
    if args.json:
        print_json(to_json(answer))
    elif answer.job_count or code == exit_codes.OK:
        print_out(render(answer, terminal_width()))
    if args.html:
        try:
            write_text_atomic(args.html, render_html(answer))
        except OSError as e:
            print(f"{_NAME}: error: cannot write --html {args.html}: {e.strerror or e}", file=sys.stderr)
            code = exit_codes.FAILURE if code == exit_codes.OK else code
        else:
            if not args.json:
                print_out(f"HTML page written to {args.html}")
    print_failures(results)
    return code

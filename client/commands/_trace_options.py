"""The options `dyno-cli trace` and `dyno-cli fetch` share once a trace is joined (output, wait, fetching,
analysis), their bounds and defaults, and the exit codes both commands document."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from dyno import exit_codes
from dyno.argtypes import INT32_MAX, nonempty_path, number
from dyno.client.commands._hosts import usage_error
from dyno.trace_ids import validate_trace_id

if TYPE_CHECKING:  # protobuf is not loaded for the commands' parsers (`trace --help`)
    from dyno.v1 import dyno_pb2

__all__ = [
    "AFTER_WINDOW_S",
    "COLLECT_EXIT_CODES",
    "COLLECT_FAILURES",
    "DEFAULT_ANALYSIS_WAIT_S",
    "ITERATION_WAIT_S",
    "MAX_FETCH_CONCURRENCY",
    "MAX_WAIT_S",
    "add_collect_arguments",
    "check_collect_arguments",
    "check_trace_id",
    "default_wait_s",
    "non_negative_float",
    "positive_int32",
]

positive_int32 = number(int, gt=0, le=INT32_MAX)  # pids, counts: int32 in the TraceRequest
non_negative_float = number(float, ge=0)
# Files fetched at once across hosts. Each host's files come one after another, so more than one per host never
# runs; and the streams share this machine's disk and NIC (the daemons serve at most 12 at once each): beyond a few
# dozen nothing gets faster, only more threads and open files.
MAX_FETCH_CONCURRENCY = 256
# The overall wait for the traces: a day is far beyond any trace window (duration traces last at most 10 min).
MAX_WAIT_S = 86400.0
_fetch_concurrency = number(int, ge=1, le=MAX_FETCH_CONCURRENCY)
_wait_s = number(float, ge=0, le=MAX_WAIT_S)  # fetch: 0 = take what is done now
_positive_wait_s = number(float, gt=0, le=MAX_WAIT_S)  # trace: 0 would cancel the trace before it starts

ITERATION_WAIT_S = 300.0  # how long iteration traces are waited for by default
DEFAULT_ANALYSIS_WAIT_S = 300.0  # --summaries: how long the hosts' analyses are waited for by default
# What trace and fetch return (TraceFlow.run, nothing_to_follow); each command says what 1 means for it.
COLLECT_EXIT_CODES: dict[int, str] = {
    exit_codes.OK: "every host's processes traced and every file fetched",
    exit_codes.USAGE: "usage, before any host is called (bad options, values beyond the daemons' request limits, "
    "malformed host lists, an output folder that exists or cannot be written)",
    exit_codes.PARTIAL: "partial: some files arrived, but a host failed or matched nothing, or a process failed, "
    "timed out or was busy, or its file did not arrive (--summaries: or a host's analysis was not merged) (each "
    "listed on stderr with its reason)",
    exit_codes.INTERRUPTED: "interrupted by Ctrl-C or SIGTERM (manifest.json is still written; during the analysis "
    "only the analysis stops)",
}
# The end of each command's FAILURE text: the flow's own failures, the same for trace and fetch.
COLLECT_FAILURES = "manifest.json could not be written (--summaries: no host's analysis could be merged)"
AFTER_WINDOW_S = 60.0  # a duration trace is waited for until its window's end plus this


def default_wait_s(request: dyno_pb2.TraceRequest, now_s: float) -> float:
    """How long to wait for a trace by default, from its request: the rest of a duration trace's window plus a
    margin (the daemons end unfinished processes by their own timeouts), else ITERATION_WAIT_S."""
    if not request.HasField("duration_ms"):
        return ITERATION_WAIT_S
    start_in = max(0.0, request.start_time_ms / 1000 - now_s) if request.HasField("start_time_ms") else 0.0
    return start_in + request.duration_ms / 1000 + AFTER_WINDOW_S


def add_collect_arguments(p: argparse.ArgumentParser, *, timeout_help: str, zero_timeout: bool) -> None:
    """--output-dir, --timeout-s (the overall wait; None when not given, its default and meaning differ per command;
    `zero_timeout`: 0 is allowed), --fetch-concurrency, --no-analyze, --html, --json, --summaries and
    --analysis-timeout-s. --output-dir is required unless --summaries (check_collect_arguments)."""
    p.add_argument(
        "--output-dir",
        type=nonempty_path,
        help="files go to OUTPUT_DIR/TRACE_ID/HOST_PORT/ (required, unless --summaries)",
    )
    p.add_argument(
        "--timeout-s",
        type=_wait_s if zero_timeout else _positive_wait_s,
        metavar="S",
        help=f"{timeout_help} ({'0-' if zero_timeout else '> 0, at most '}{MAX_WAIT_S:g})",
    )
    p.add_argument(
        "--fetch-concurrency",
        type=_fetch_concurrency,
        default=8,
        metavar="N",
        help=f"files fetched at once, across hosts (default 8; 1-{MAX_FETCH_CONCURRENCY})",
    )
    p.add_argument("--no-analyze", action="store_true", help="do not analyze the fetched files")
    p.add_argument("--html", type=nonempty_path, metavar="FILE", help="also write the HTML analysis report here")
    p.add_argument("--json", action="store_true", help="print the manifest and the report as one JSON object on stdout")
    p.add_argument(
        "--all-ranks",
        action="store_true",
        help="a section, findings and tables per rank in the text and HTML reports however many ranks (past 16 "
        "ranks they show the slowest and fastest ranks, and a rule's findings on many ranks as one line)",
    )
    p.add_argument(
        "--summaries",
        action="store_true",
        help="pull no raw trace: once the traces are done, ask each host for its own analysis of them "
        "(GetTraceSummary) and merge those into the job-wide report, straggler and step-time spread across ranks "
        "included; nothing is written but --html. A host whose analysis failed or is disabled is named with its "
        "reason, and the others are merged (exit 3)",
    )
    p.add_argument(
        "--analysis-timeout-s",
        type=_positive_wait_s,
        default=DEFAULT_ANALYSIS_WAIT_S,
        metavar="S",
        help=f"with --summaries: how long to wait for the hosts' analyses once the traces are done (default "
        f"{DEFAULT_ANALYSIS_WAIT_S:g}; at most {MAX_WAIT_S:g})",
    )


def check_collect_arguments(args: argparse.Namespace) -> None:
    """Usage error (exit 2) for add_collect_arguments' options that do not go together."""
    if not args.summaries:
        if args.output_dir is None:
            usage_error("--output-dir is required (unless --summaries)")
        return
    if args.output_dir is not None:
        usage_error("--output-dir: --summaries fetches and writes no file (the report is printed; --html writes it)")
    if args.no_analyze:
        usage_error("--no-analyze: --summaries is the analysis (merged from the hosts'); it cannot go with it")


def check_trace_id(trace_id: str) -> None:
    """Usage error (exit 2) unless `trace_id` is one the daemons accept (dyno.trace_ids)."""
    try:
        validate_trace_id(trace_id)
    except ValueError as e:
        usage_error(f"--trace-id: {e}")

"""dyno-cli fetch: attach to a trace already running or finished on the daemons (started by an earlier `dyno-cli
trace` that was interrupted or gave up waiting, by another user, or by a tool using the library), wait for its
processes, and pull every file exactly as `dyno-cli trace` does: OUTPUT_DIR/TRACE_ID/HOST_PORT/ with
manifest.json, progress, summary, analysis. It never starts or cancels anything."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from dyno.client.commands._hosts import add_host_command, client_auth, resolve_hosts
from dyno.client.commands._trace_options import (
    AFTER_WINDOW_S,
    COLLECT_EXIT_CODES,
    COLLECT_FAILURES,
    ITERATION_WAIT_S,
    add_collect_arguments,
    check_collect_arguments,
    check_trace_id,
    default_wait_s,
)
from dyno.client.commands._trace_output import check_html, check_trace_folder, check_writable, trace_folder
from dyno.exit_codes import FAILURE, OK, PARTIAL, USAGE

__all__ = ["EXIT_CODES", "register", "run"]

EXIT_CODES = {
    **COLLECT_EXIT_CODES,
    OK: "every file fetched",
    # not trace's "an output folder that exists": fetch resumes into the folder an earlier run left
    USAGE: "usage, before any host is called (bad options, a malformed trace id or host list, an output folder that "
    "cannot be written or a file where OUTPUT_DIR/TRACE_ID goes)",
    PARTIAL: "partial: some files arrived, but a host failed or does not know the trace, or a process failed, timed "
    "out or is still tracing when --timeout-s ends (never cancelled: fetch again later), or its file did not arrive "
    "(each listed on stderr with its reason)",
    FAILURE: f"nothing fetched, no daemon knows the trace, or {COLLECT_FAILURES}",
}


def register(sub: argparse._SubParsersAction) -> None:
    p = add_host_command(
        sub,
        "fetch",
        description="Attach to the trace TRACE_ID on every daemon (--host/--hosts/--hostfile/--slurm-job), started "
        "earlier by `dyno-cli trace` (interrupted, or its --timeout-s ran out), by another user or by a tool "
        "using the library; wait for the processes still tracing, and fetch every file as soon as it is done into "
        "OUTPUT_DIR/TRACE_ID/HOST_PORT/ (checksum-verified) with OUTPUT_DIR/TRACE_ID/manifest.json, as `dyno-cli "
        "trace` does; then analyze them and print the cross-rank report. fetch never starts or cancels a trace: "
        "--timeout-s and Ctrl-C only stop waiting, and running it again later fetches the rest. Files already in "
        "the folder from an earlier fetch are kept only when they match the checksum recorded in its "
        "manifest.json and the daemon's size; anything else is fetched again. A daemon that does not know the "
        "trace (wrong id or host, deleted by retention, or the daemon restarted while it was still running: "
        "finished traces survive a restart) is a failed host with that reason.",
        codes=EXIT_CODES,
        call_timeout_flag="--call-timeout-s",
    )
    p.add_argument("--trace-id", required=True, help="the trace to fetch (as `dyno-cli trace` printed it)")
    add_collect_arguments(
        p,
        zero_timeout=True,
        timeout_help="overall wait for processes still tracing; then the files already done are fetched and the "
        "others reported as still tracing (never cancelled). 0: fetch what is done now. Default: until the "
        f"trace's window ends + {AFTER_WINDOW_S:g} s, or {ITERATION_WAIT_S:g} s for iteration traces",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # the client stack (grpc, protobuf, the trace flow and its analysis): here, not for `fetch --help`
    from dyno.client.cluster import Cluster
    from dyno.client.commands._trace_flow import TraceFlow
    from dyno.client.commands._trace_render import nothing_to_follow, say
    from dyno.client.trace.cluster import ClusterTrace
    from dyno.client.trace.manifest import previous_files, write_manifest
    from dyno.v1 import dyno_pb2

    check_trace_id(args.trace_id)
    check_collect_arguments(args)
    hosts = resolve_hosts(args)
    auth = client_auth(args)
    folder: Path | None = None  # --summaries: nothing is written
    previous = {}
    if not args.summaries:
        folder = (args.output_dir / args.trace_id).absolute()  # every path printed is absolute
        check_writable(args.output_dir)
        check_trace_folder(folder, may_hold_files=True)
    check_html(args.html, no_analyze=args.no_analyze)
    if folder is not None:  # read before anything is written there
        previous = previous_files(folder)
    with Cluster(hosts, deadline_s=args.call_timeout_s, max_concurrency=args.max_concurrency, auth=auth) as cluster:
        ct = ClusterTrace(
            cluster,
            dyno_pb2.TraceRequest(trace_id=args.trace_id),
            folder,
            wait_s=0.0,  # known once the daemons said what the trace is
            unreachable_s=args.call_timeout_s,
            fetch_concurrency=args.fetch_concurrency,
            previous=previous,
        )
        say(f"fetch {args.trace_id}: attaching on {len(hosts)} host(s)")
        ct.attach()
        now = time.time()
        flow = TraceFlow(ct, args, folder, command="fetch", requested_ms=ct.created_ms or int(now * 1000))
        if not ct.attached_any:  # an earlier manifest in the folder is left as it is
            return nothing_to_follow(flow, f"no host has trace {args.trace_id!r}: nothing to fetch", FAILURE)
        ct.wait_s = default_wait_s(ct.request, now) if args.timeout_s is None else args.timeout_s
        title = f"fetch {args.trace_id} (job {ct.request.job_id})"
        # A Ctrl-C from here on is held back except where the command waits, so manifest.json is always whole.
        with flow.guard, trace_folder(folder):  # a failure leaves no empty folder behind (one that was there is kept)
            if folder is not None:  # (--summaries: no folder)
                write_manifest(folder, flow.manifest("running"))
            return flow.run(title)

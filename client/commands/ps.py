"""dyno-cli ps: every trainer process registered with a daemon (agent or libkineto), to see what a trace matches."""

from __future__ import annotations

import argparse
import time

from dyno.client.commands._common import add_target_arguments, client_from_args, print_json, proto_to_dict
from dyno.client.format import table
from dyno.v1 import dyno_pb2

__all__ = ["register", "render"]

_PROTOCOL = {dyno_pb2.PROTOCOL_AGENT: "agent", dyno_pb2.PROTOCOL_KINETO: "kineto"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ps",
        help="registered PyTorch processes",
        description="List the trainer processes registered with the daemon: pid, job id, rank, protocol (agent or "
        "kineto), GPU, whether a trace is running, when it was last heard from, and its ancestry (what --pids of "
        "`dyno-cli trace` matches).",
    )
    add_target_arguments(p)
    p.add_argument("--job-id", default="", help="only processes of this job")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def _rank(p: dyno_pb2.ProcessInfo) -> str:
    if not p.HasField("rank"):
        return "-"
    return f"{p.rank}/{p.world_size}" if p.HasField("world_size") else str(p.rank)


def render(resp: dyno_pb2.ListProcessesResponse, now_ms: int | None = None) -> str:
    if not resp.processes:
        return f"no processes registered on {resp.hostname}"
    now = int(time.time() * 1000) if now_ms is None else now_ms
    rows = []
    for p in resp.processes:
        ago = max(0.0, (now - p.last_seen_ms) / 1000)
        rows.append(
            [
                p.pid,
                p.job_id or "-",
                _rank(p),
                _PROTOCOL.get(p.protocol, "?"),
                p.gpu if p.gpu >= 0 else "-",
                f"yes ({p.current_trace_id})" if p.busy else "no",
                f"{ago:.0f}s ago",
                ",".join(str(a) for a in p.ancestry) or "-",
                (p.cmdline[:60] or "-"),
            ]
        )
    return table(["PID", "JOB", "RANK", "PROTOCOL", "GPU", "TRACING", "LAST SEEN", "ANCESTRY", "CMD"], rows)


def run(args: argparse.Namespace) -> int:
    with client_from_args(args) as c:
        resp = c.list_processes(args.job_id)
    if args.json:
        print_json(proto_to_dict(resp))
    else:
        print(render(resp))
    return 0

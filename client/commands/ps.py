"""dyno-cli ps: every trainer process registered with the daemons (agent or libkineto), to see what a trace
matches. One table across hosts, with a HOST column."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

from dyno.argtypes import job_id as job_id_arg
from dyno.client.commands._common import REGISTER_HINT, host_entry, print_json, print_out, proto_to_dict, terminal_width
from dyno.client.commands._hosts import (
    FANOUT_EXIT_CODES,
    add_host_command,
    cluster_from_args,
    fanout_exit_code,
    print_failures,
)
from dyno.client.format import human_duration, table

if TYPE_CHECKING:  # the client stack (grpc, protobuf) is loaded by run() alone: `ps --help` needs none of it
    from dyno.client.cluster import HostResult
    from dyno.v1 import dyno_pb2

__all__ = ["empty_hint", "register", "render"]


@cache
def _names() -> tuple[dict[int, str], dict[int, str]]:
    """The PROTOCOL and ROLE columns' words by enum value (a role unspecified, "-": a daemon from before roles)."""
    from dyno.v1 import dyno_pb2

    protocol: dict[int, str] = {dyno_pb2.PROTOCOL_AGENT: "agent", dyno_pb2.PROTOCOL_KINETO: "kineto"}
    role: dict[int, str] = {
        dyno_pb2.PROCESS_ROLE_TRAINER: "trainer",
        dyno_pb2.PROCESS_ROLE_LAUNCHER: "launcher",
        dyno_pb2.PROCESS_ROLE_DATALOADER: "dataloader",
    }
    return protocol, role


def register(sub: argparse._SubParsersAction) -> None:
    p = add_host_command(
        sub,
        "ps",
        description="List the trainer processes registered with the daemons: host, pid, job id, rank, role "
        "(trainer; launcher: starts trainers and waits, torch's own launcher (torchrun) is never traced; dataloader: "
        "a DataLoader worker; --process-limit takes trainers, then launchers, then dataloaders), protocol (agent or "
        "kineto), GPU, whether a trace is running, when it was last heard from, and its ancestry (what --pids of "
        "`dyno-cli trace` matches). One table across every host given.",
        codes=FANOUT_EXIT_CODES,
    )
    # the same job-id rule as `trace --job-id` (stripped): `ps --job-id " 42"` listed nothing where trace matched
    p.add_argument("--job-id", type=job_id_arg, help="only processes of this job")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def _rank(p: dyno_pb2.ProcessInfo) -> str:
    if not p.HasField("rank"):
        return "-"
    return f"{p.rank}/{p.world_size}" if p.HasField("world_size") else str(p.rank)


def render(
    results: Sequence[HostResult[dyno_pb2.ListProcessesResponse]],
    now_ms: int | None = None,
    job_id: str = "",
    max_width: int | None = None,
) -> str:
    """One table of every answering host's processes (failed hosts are reported apart, on stderr); `job_id`: the
    filter the daemons were asked for, named when nothing matched it; `max_width`: the terminal's width (the
    command line is cut to fit)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    protocols, roles = _names()
    rows = []
    for r in results:
        if not r.ok or r.value is None:
            continue
        for p in r.value.processes:
            ago = max(0.0, (now - p.last_seen_ms) / 1000)
            rows.append(
                [
                    str(r.host),
                    p.pid,
                    p.job_id or "-",
                    _rank(p),
                    roles.get(p.role, "-"),
                    protocols.get(p.protocol, "?"),
                    p.gpu if p.gpu >= 0 else "-",
                    f"yes ({p.current_trace_id})" if p.busy else "no",
                    f"{human_duration(ago)} ago",
                    ",".join(str(a) for a in p.ancestry) or "-",
                    (p.cmdline[:60] or "-"),
                ]
            )
    if not rows:
        answered = [r for r in results if r.ok]
        what = f"no process of job {job_id!r}" if job_id else "no processes"
        return f"{what} registered on {len(answered)} host(s)" if answered else ""
    return table(
        ["HOST", "PID", "JOB", "RANK", "ROLE", "PROTOCOL", "GPU", "TRACING", "LAST SEEN", "ANCESTRY", "CMD"],
        rows,
        max_width=max_width,
    )


def empty_hint(results: Sequence[HostResult[dyno_pb2.ListProcessesResponse]], job_id: str = "") -> str:
    """What to try when every answering host listed nothing (said on stderr under the table's one line; "" when
    some process is listed or no host answered): a new user's trainer that is not there was started without the
    agent or libkineto's daemon mode, or, with --job-id, registered under another id."""
    answered = [r for r in results if r.ok and r.value is not None]
    if not answered or any(r.value.processes for r in answered if r.value is not None):
        return ""
    if job_id:
        return "hint: `dyno-cli ps` without --job-id lists every registered process with its job id"
    return REGISTER_HINT


def run(args: argparse.Namespace) -> int:
    with cluster_from_args(args) as cluster:
        results = cluster.list_processes(args.job_id or "")
    if args.json:
        # One host: the daemon's answer as is (its "processes" list); several: one entry per host.
        if len(results) == 1 and results[0].ok:
            print_json(proto_to_dict(results[0].value))
        else:
            print_json(
                [host_entry(r, {"processes": proto_to_dict(r.value)["processes"] if r.ok else []}) for r in results]
            )
    else:
        # on a terminal, a line per process (a 230-column row wrapped into three); into a pipe, every character
        text = render(results, job_id=args.job_id or "", max_width=terminal_width())
        if text:
            print_out(text)
        if hint := empty_hint(results, args.job_id or ""):
            print(f"dyno-cli ps: {hint}", file=sys.stderr)
    print_failures(results)
    return fanout_exit_code(results)

"""dyno-cli status: the daemon's health, samplers, GPUs and trace dir (one host in detail, many as a table)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dyno.client.commands._common import host_entry, host_table, print_json, print_out, proto_to_dict
from dyno.client.commands._hosts import (
    FANOUT_EXIT_CODES,
    add_host_command,
    cluster_from_args,
    fanout_exit_code,
    print_failures,
)
from dyno.client.format import human_bytes, human_duration, table

if TYPE_CHECKING:  # the client stack (grpc, protobuf) is loaded by run() alone: `status --help` needs none of it
    from dyno.client.cluster import HostResult
    from dyno.v1 import dyno_pb2


def register(sub: argparse._SubParsersAction) -> None:
    p = add_host_command(
        sub,
        "status",
        description="Show daemon status: version, uptime, each sampler (ok or unavailable with the reason), the "
        "GPU inventory, registered trainer processes and trace-dir usage (its path absolute). With several hosts, "
        "one row per host, failed hosts included.",
        codes=FANOUT_EXIT_CODES,
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def _sampler_text(st: dyno_pb2.SamplerState) -> str:
    if not st.ok:
        return f"unavailable: {st.reason}"
    return f"ok ({st.backend}{', SIMULATED' if st.simulated else ''})"


def render(s: dyno_pb2.Status, target: str) -> str:
    lines = [
        f"host        {s.hostname} ({target}), dynod {s.version}, pid {s.pid}, up {human_duration(s.uptime_s)}",
        f"sampling    every {s.interval_s:g} s, {s.samples_in_history} samples kept (history {s.history_s:g} s)",
        f"processes   {s.registered_processes} registered, {s.active_traces} active traces",
        f"traces      {s.trace_dir} ({human_bytes(s.trace_dir_bytes)})",
        f"agent       {s.agent_socket}   kineto endpoint: {s.kineto_endpoint}",
    ]
    if s.job_store:  # empty from a dynod without job accounting
        lines.append(f"job store   {s.job_store}")
    if s.periodic_profiling:  # empty from a dynod without periodic profiling
        lines.append(f"periodic    {s.periodic_profiling}")
    lines += [
        "",
    ]
    rows = []
    for st in s.samplers:
        state = "ok" if st.ok else f"unavailable: {st.reason}"
        rows.append([st.name, st.backend + (" (SIMULATED)" if st.simulated else ""), state])
    lines.append(table(["SAMPLER", "BACKEND", "STATE"], rows))
    if s.gpus:
        lines.append("")
        lines.append(
            table(
                ["GPU", "NAME", "UUID", "MEMORY"],
                [
                    [
                        g.index,
                        g.name + (" (SIMULATED)" if g.simulated and "simulated" not in g.name.lower() else ""),
                        g.uuid,
                        human_bytes(g.memory_total_bytes),
                    ]
                    for g in s.gpus
                ],
            )
        )
    return "\n".join(lines)


def _row(s: dyno_pb2.Status) -> list[object]:
    gpu = next((st for st in s.samplers if st.name == "gpu"), None)
    return [
        s.version,
        human_duration(s.uptime_s),
        str(len(s.gpus)),
        _sampler_text(gpu) if gpu else "-",
        str(s.registered_processes),
        str(s.active_traces),
    ]


def render_many(results: Sequence[HostResult[dyno_pb2.Status]]) -> str:
    return host_table(["HOST", "VERSION", "UP", "GPUS", "GPU SAMPLER", "PROCS", "TRACES"], results, _row)


def run(args: argparse.Namespace) -> int:
    with cluster_from_args(args) as cluster:
        results = cluster.status()
    if args.json:
        # One host that answered: its status as is; otherwise one entry per host, a failed one with its error.
        print_json(
            proto_to_dict(results[0].value)
            if len(results) == 1 and results[0].ok
            else [host_entry(r, {"status": proto_to_dict(r.value) if r.ok else None}) for r in results]
        )
    elif len(results) == 1 and results[0].ok:
        print_out(render(results[0].answer, str(results[0].host)))
    elif len(results) > 1:
        print_out(render_many(results))
    print_failures(results)
    return fanout_exit_code(results)

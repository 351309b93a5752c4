"""dyno-cli status: the daemon's health, samplers, GPUs and trace dir."""

from __future__ import annotations

import argparse

from dyno.client.commands._common import add_target_arguments, client_from_args, print_json, proto_to_dict
from dyno.client.format import human_bytes, table
from dyno.v1 import dyno_pb2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="daemon status: samplers, GPUs, registered processes",
                       description="Show a daemon's status: version, uptime, each sampler (ok or unavailable with "
                       "the reason), the GPU inventory, registered trainer processes and trace-dir usage.")
    add_target_arguments(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def render(s: dyno_pb2.Status, target: str) -> str:
    lines = [
        f"host        {s.hostname} ({target}), dynod {s.version}, pid {s.pid}, up {s.uptime_s:.0f} s",
        f"sampling    every {s.interval_s:g} s, {s.samples_in_history} samples kept (history {s.history_s:g} s)",
        f"processes   {s.registered_processes} registered, {s.active_traces} active traces",
        f"traces      {s.trace_dir} ({human_bytes(s.trace_dir_bytes)})",
        f"agent       {s.agent_socket}   kineto endpoint: {s.kineto_endpoint}",
        "",
    ]
    rows = []
    for st in s.samplers:
        state = "ok" if st.ok else f"unavailable: {st.reason}"
        rows.append([st.name, st.backend + (" (SIMULATED)" if st.simulated else ""), state])
    lines.append(table(["SAMPLER", "BACKEND", "STATE"], rows))
    if s.gpus:
        lines.append("")
        lines.append(table(
            ["GPU", "NAME", "UUID", "MEMORY"],
            [[g.index, g.name + (" (SIMULATED)" if g.simulated else ""), g.uuid, human_bytes(g.memory_total_bytes)]
             for g in s.gpus],
        ))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    with client_from_args(args) as c:
        s = c.status()
        if args.json:
            print_json(proto_to_dict(s))
        else:
            print(render(s, c.target))
    return 0

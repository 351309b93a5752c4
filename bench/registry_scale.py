#!/usr/bin/env python3
"""One host's registry at scale: many registered trainers (dyno agents and libkineto, mixed) and many RPC callers
at once, against one real dynod on loopback. Bounded: it stops by itself after --seconds of load.

Starts `python -m dyno.daemon` (bench/soak/dynod.py: sim GPUs, a kineto socket dir, free loopback ports), then:
1. --agents agent trainers (scale/agents.py: a `sleep` process each for a live pid, Register and a Watch stream on
   a connection of its own) and --kineto libkineto trainers (scale/kineto_clients.py: forked processes speaking
   libkineto's datagrams, a `req` poll every --poll-s, each reply timed), until all are registered or refused;
2. --callers RPC callers (scale/callers.py, in processes of 10 threads: ListProcesses, GetStatus, GetMetrics in turn,
   back to back, or one call every --pace-ms per caller) for --seconds, while the trainers keep polling and watching;
3. the trainers end; dynod's thread count is watched until it is back to where it was before the load.

Prints: registrations refused (by code), each RPC's count and p50/p99/max latency, the calls per second and the CPU
time per call of dynod and of the callers (closed-loop callers on the same cores: latency ~= callers / calls per
second, so CPU per call is what sets it, and it varies far less with other load on the machine than latency), the
share of libkineto polls answered within libkineto's ~90 ms window during the RPC load (and their mean/p99/max),
dynod's threads (before, peak, after) and RSS. Asserts nothing.

    python bench/registry_scale.py [--agents 500] [--kineto 500] [--callers 50] [--seconds 30] [--poll-s 5]
                                   [--pace-ms 0]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
from bench_common import env_without_job_ids, proc_cpu_s
from scale.agents import hold_agents
from scale.callers import RPCS, run_callers
from scale.kineto_clients import kineto_clients
from soak.dynod import Dynod

from dyno.v1 import dyno_pb2, dyno_pb2_grpc

_CALLERS_PER_PROCESS = 10
_KINETO_WINDOW_S = 0.09
_QUIET_S = 5.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agents", type=int, default=500, help="agent trainers registered at once (default 500)")
    ap.add_argument("--kineto", type=int, default=500, help="libkineto trainers registered at once (default 500)")
    ap.add_argument("--callers", type=int, default=50, help="concurrent RPC callers (default 50)")
    ap.add_argument("--seconds", type=float, default=30.0, help="seconds of RPC load (default 30)")
    ap.add_argument("--poll-s", type=float, default=5.0, help="libkineto's poll interval (its default: 5)")
    ap.add_argument(
        "--pace-ms", type=float, default=0.0, help="each caller starts a call every PACE ms (default 0: back to back)"
    )
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (dynod's log) after the run")
    # the load drivers, each a process of its own (started by this script)
    ap.add_argument("--role", choices=["agents", "kineto", "callers"], help=argparse.SUPPRESS)
    ap.add_argument("--role-args", nargs="*", default=[], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.role:
        return _role(args.role, args.role_args)
    return run(args)


def _role(role: str, a: list[str]) -> int:
    if role == "agents":
        hold_agents(Path(a[0]), int(a[1]), Path(a[2]), Path(a[3]))
    elif role == "kineto":
        kineto_clients(Path(a[0]), int(a[1]), float(a[2]), Path(a[3]), Path(a[4]))
    else:
        run_callers(a[0], int(a[1]), float(a[2]), float(a[3]), Path(a[4]))
    return 0


def _spawn(role: str, *role_args: object) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, __file__, "--role", role, "--role-args", *map(str, role_args)]
    return subprocess.Popen(cmd, env=env_without_job_ids())


def _proc_status(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("Threads", "VmRSS"):
                out[key] = int(value.split()[0])
    return out


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def run(args: argparse.Namespace) -> int:
    root = Path(tempfile.mkdtemp(prefix="dyno-scale-", dir="/tmp"))
    d = Dynod(root)
    d.start()
    stop_file = root / "stop"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        return _drive(args, d, root, stop_file, procs)
    finally:
        stop_file.touch()
        for p in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        d.stop()
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def _drive(
    args: argparse.Namespace, d: Dynod, root: Path, stop_file: Path, procs: list[subprocess.Popen[bytes]]
) -> int:
    channel = grpc.insecure_channel(d.target)
    stub = dyno_pb2_grpc.DynoStub(channel)
    time.sleep(1.0)
    before = _proc_status(d.pid)
    print(f"dynod pid {d.pid} grpc {d.target}: {before['Threads']} threads, {before['VmRSS'] // 1024} MiB", flush=True)

    agent_status = root / "agents.json"
    kineto_out = root / "kineto"
    target = args.agents + args.kineto
    started = time.monotonic()
    procs.append(_spawn("agents", d.agent_socket, args.agents, agent_status, stop_file))
    procs.append(_spawn("kineto", d.kineto_dir, args.kineto, args.poll_s, kineto_out, stop_file))
    registered, agents = 0, {"watching": 0, "refused": {}}
    deadline = started + 120 + args.kineto * args.poll_s / max(1, args.kineto)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        registered = stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=30).registered_processes
        if agent_status.exists():
            agents = json.loads(agent_status.read_text())
        settled = agents["watching"] + sum(agents["refused"].values()) >= args.agents
        if registered >= target or (settled and registered >= agents["watching"] + args.kineto):
            break
    print(
        f"registered {registered} of {target} in {time.monotonic() - started:.0f} s "
        f"({agents['watching']} agents watching, refused: {agents['refused'] or 'none'})",
        flush=True,
    )

    quiet_from, cpu_quiet = time.monotonic(), proc_cpu_s(d.pid)
    time.sleep(_QUIET_S)  # dynod's CPU with the trainers registered and no callers: the polls, keepalives, sampling
    quiet = (proc_cpu_s(d.pid) - cpu_quiet) / (time.monotonic() - quiet_from)
    load_from = time.monotonic()
    cpu_from = proc_cpu_s(d.pid)
    out_files = []
    for k in range(0, args.callers, _CALLERS_PER_PROCESS):
        out = root / f"callers-{k}.json"
        out_files.append(out)
        n = min(_CALLERS_PER_PROCESS, args.callers - k)
        procs.append(_spawn("callers", d.target, n, args.seconds, args.pace_ms / 1000, out))
    peak = dict(before)
    while time.monotonic() < load_from + args.seconds + 2 and not all(f.exists() for f in out_files):
        time.sleep(1.0)
        now = _proc_status(d.pid)
        peak = {k: max(peak[k], now[k]) for k in peak}
    while not all(f.exists() for f in out_files) and time.monotonic() < load_from + args.seconds + 60:
        time.sleep(0.5)
    load_to = time.monotonic()
    dynod_cpu = proc_cpu_s(d.pid) - cpu_from
    registered_end = stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=30).registered_processes
    agents = json.loads(agent_status.read_text())

    stop_file.touch()
    for p in procs:
        p.wait(120)
    ended = time.monotonic()
    after = _proc_status(d.pid)
    while after["Threads"] > before["Threads"] and time.monotonic() < ended + 30:
        time.sleep(0.5)
        after = _proc_status(d.pid)
    back_in = time.monotonic() - ended
    channel.close()

    results: dict[str, list[float]] = {rpc: [] for rpc in RPCS}
    errors: dict[str, int] = {}
    cpu = {"dynod": dynod_cpu, "callers": 0.0, "quiet": quiet}
    for f in out_files:
        part = json.loads(f.read_text())
        cpu["callers"] += part["cpu_s"]
        for rpc in RPCS:
            results[rpc] += part[rpc]
        for key, n in part["errors"].items():
            errors[key] = errors.get(key, 0) + n
    polls = [
        (sent, took)
        for f in kineto_out.glob("*.json")
        for sent, took in json.loads(f.read_text())
        if load_from <= sent <= load_to
    ]
    _report(
        args, registered_end, agents, results, errors, cpu, polls, before, peak, after, back_in, load_to - load_from
    )
    return 0


def _report(
    args: argparse.Namespace,
    registered: int,
    agents: dict,
    results: dict[str, list[float]],
    errors: dict[str, int],
    cpu: dict[str, float],
    polls: list[tuple[float, float | None]],
    before: dict[str, int],
    peak: dict[str, int],
    after: dict[str, int],
    back_in: float,
    load_s: float,
) -> None:
    print()
    print(
        f"load: {args.agents} agents + {args.kineto} libkineto trainers (poll every {args.poll_s:g} s), "
        f"{args.callers} RPC callers ({f'a call every {args.pace_ms:g} ms each' if args.pace_ms else 'back to back'}) "
        f"for {load_s:.0f} s"
    )
    print(f"registered at the end of the load: {registered}; agent refusals: {agents['refused'] or 'none'}")
    print(f"RPC errors: {errors or 'none'}")
    print(f"{'RPC':<14} {'calls':>7} {'per s':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for rpc, lat in results.items():
        ms = [x * 1000 for x in lat]
        print(
            f"{rpc:<14} {len(ms):>7} {len(ms) / load_s:>7.0f} {_pct(ms, 0.5):>8.1f} {_pct(ms, 0.99):>8.1f} "
            f"{max(ms, default=float('nan')):>8.1f}"
        )
    calls = sum(len(lat) for lat in results.values())
    print(
        f"calls/s (all three): {calls / load_s:.0f}; CPU per call: dynod {1000 * cpu['dynod'] / max(1, calls):.2f} ms "
        f"(everything it did during the load: {cpu['dynod'] / load_s:.2f} cores; {cpu['quiet']:.2f} before it, "
        f"without callers), callers "
        f"{1000 * cpu['callers'] / max(1, calls):.2f} ms ({cpu['callers'] / load_s:.2f} cores); "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print("target: ListProcesses p99 <= 100 ms, no refusals, libkineto polls within 90 ms >= 99%, threads back")
    answered = [t for _, t in polls if t is not None]
    within = sum(1 for t in answered if t <= _KINETO_WINDOW_S)
    share = 100 * within / len(polls) if polls else float("nan")
    mean = 1000 * sum(answered) / len(answered) if answered else float("nan")
    print(
        f"libkineto polls during the load: {len(polls)}, answered within 90 ms: {within} ({share:.1f}%), "
        f"mean {mean:.1f} ms, p99 {1000 * _pct(answered, 0.99):.1f} ms, max {1000 * max(answered, default=0):.1f} "
        f"ms, unanswered after 5 s: {len(polls) - len(answered)}"
    )
    print(
        f"dynod threads: {before['Threads']} before, {peak['Threads']} peak, {after['Threads']} after "
        f"({back_in:.1f} s after the trainers ended); RSS {before['VmRSS'] // 1024} -> {peak['VmRSS'] // 1024} MiB peak"
    )


if __name__ == "__main__":
    sys.exit(main())

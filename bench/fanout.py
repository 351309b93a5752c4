"""Fan-out benchmark: `status` and a StartTrace request across hundreds of daemons on loopback, Cluster vs a
sequential loop over the same hosts in the same run.

    python bench/fanout.py                       # 256 hosts: 4 real dynods + fake Dyno servers in 4 processes
    python bench/fanout.py --hosts 512 --real 8 --latency-ms 0,2,10

Real dynod processes are started as far as the machine allows (--real); the rest are lightweight fake Dyno
servers (dyno.daemon.fake_server: same wire contract, fixed answers), many per helper process. On one machine
all servers share its few cores, so with zero latency the sequential loop and the fan-out are both bounded by
the same CPU. In a fleet each daemon answers on its own host, after a network round trip: --latency-ms adds
that per-request service time to the fake servers (real dynods answer at their own speed), and the table shows
the fan-out at each latency. The StartTrace request is what `dyno-cli trace` sends (one new trace id and one
absolute start time per fan-out). Behind each real dynod a BenchAgent (this process, registered over the daemon's
Agent socket) stands in for a trainer, so the real daemons match, create the trace dir and deliver the request,
and the agent answers FAILED at once to be free for the next one; the fake servers answer from fixed data.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from bench_common import free_port

from dyno.client.client import DynoClient
from dyno.client.cluster import Cluster, open_client
from dyno.client.errors import DynoError
from dyno.client.hosts import Host
from dyno.client.trace.start import start_trace_retrying
from dyno.daemon.process import READY_LINE
from dyno.v1 import dyno_pb2


# -- servers ----------------------------------------------------------------------------------------------------
def _serve_fakes(count: int) -> int:
    """Helper-process mode: start `count` fake servers, print their ports as one JSON line, then obey stdin
    ("latency <ms>") until it closes."""
    from dyno.daemon.fake_server import start_fake_servers

    servers = start_fake_servers(count)
    print(json.dumps([s.port for s in servers]), flush=True)
    for line in sys.stdin:
        cmd, _, value = line.strip().partition(" ")
        if cmd == "latency":
            for s in servers:
                s.servicer.delay_s = float(value) / 1000.0
            print("ok", flush=True)
    for s in servers:
        s.server.stop(0)
    return 0


@dataclass
class FakeGroup:
    proc: subprocess.Popen[str]
    ports: list[int]

    def set_latency(self, ms: float) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"latency {ms}\n")
        self.proc.stdin.flush()
        if self.proc.stdout.readline().strip() != "ok":
            raise RuntimeError("fake server group did not acknowledge the latency change")


def start_fake_groups(total: int, groups: int) -> list[FakeGroup]:
    sizes = [total // groups + (1 if i < total % groups else 0) for i in range(groups)]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--serve-fakes", str(n)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in sizes
        if n
    ]
    out = []
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline()
        if not line:
            raise RuntimeError("a fake server group failed to start")
        out.append(FakeGroup(p, json.loads(line)))
    return out


@dataclass
class RealDynod:
    proc: subprocess.Popen[str]
    port: int
    dir: Path


def start_dynods(count: int) -> list[RealDynod]:
    started = []
    for _ in range(count):
        d = Path(tempfile.mkdtemp(prefix="dyno-bench-", dir="/tmp"))
        port = free_port()
        args = [
            "--listen",
            "127.0.0.1",
            "--port",
            str(port),
            "--metrics-port",
            "0",
            "--gpu-backend",
            "sim",
            "--interval-s",
            "1",
            "--state-dir",
            str(d / "state"),
            "--trace-dir",
            str(d / "traces"),
            "--agent-socket",
            str(d / "agent.sock"),
            "--kineto-endpoint",
            f"dyno-bench-{uuid.uuid4().hex[:12]}",
        ]
        proc = subprocess.Popen(
            [sys.executable, "-m", "dyno.daemon", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(RealDynod(proc, port, d))
    for r in started:  # they start in parallel; wait for each one's ready line
        assert r.proc.stderr is not None
        for line in r.proc.stderr:
            if READY_LINE.search(line):
                break
        else:
            raise RuntimeError(f"dynod on port {r.port} exited with {r.proc.wait()}")
        r.proc.stderr.close()  # nothing reads it from here on: do not let the pipe fill and block the daemon
    return started


# -- measurements -----------------------------------------------------------------------------------------------
def _timed(fn: Callable[[], int]) -> tuple[float, int]:
    start = time.perf_counter()
    ok = fn()
    return time.perf_counter() - start, ok


Rpc = Callable[[DynoClient], object]


def _status(c: DynoClient) -> object:
    return c.status()


def _start_trace() -> Rpc:
    # What `dyno-cli trace` sends to every host: one new id and one absolute start time per fan-out (a daemon
    # refuses a trace id it already used).
    request = dyno_pb2.TraceRequest(
        job_id="job1",
        trace_id=f"bench-{uuid.uuid4().hex[:12]}",
        duration_ms=500,
        start_time_ms=int(time.time() * 1000) + 6000,
    )
    return lambda c: start_trace_retrying(c, request)


# Each timed run gets a fresh Rpc from its factory.
RPCS: dict[str, Callable[[], Rpc]] = {"status": lambda: _status, "start_trace": _start_trace}


class BenchAgent:
    """Stands in for a trainer behind each real dynod: registers this process (job "job1") over the daemon's Agent
    socket, holds the Watch stream, and answers every trace request at once with FAILED, so the daemon does the
    whole StartTrace path (match, trace dir, delivery) and the process is free for the next request."""

    def __init__(self, socket_path: Path, rank: int) -> None:
        from dyno.v1 import agent_pb2, agent_pb2_grpc

        self._pb = agent_pb2
        self._channel = grpc.insecure_channel(f"unix:{socket_path}")
        self._stub = agent_pb2_grpc.AgentStub(self._channel)
        reg = self._stub.Register(
            agent_pb2.RegisterRequest(pid=os.getpid(), job_id="job1", rank=rank, world_size=1), timeout=10
        )
        self._watch = self._stub.Watch(agent_pb2.WatchRequest(pid=os.getpid(), session_id=reg.session_id))
        self.requests = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        try:
            for cmd in self._watch:
                if cmd.WhichOneof("kind") == "trace":
                    self.requests += 1
                    self._stub.ReportTrace(
                        self._pb.ReportTraceRequest(
                            pid=os.getpid(),
                            trace_id=cmd.trace.trace_id,
                            state=dyno_pb2.TRACE_STATE_FAILED,
                            error="bench agent: no trainer",
                        ),
                        timeout=5,
                    )
        except grpc.RpcError:
            pass  # the daemon stopped, or close()

    def close(self) -> None:
        self._watch.cancel()
        self._channel.close()


def sequential(hosts: Sequence[Host], clients: dict[Host, DynoClient] | None, rpc: Rpc) -> int:
    """What a shell loop or a naive script does: one host after the other. With `clients`, channels are reused.
    Returns how many hosts answered without error."""
    ok = 0
    for h in hosts:
        try:
            if clients is None:
                with open_client(h, timeout_s=5.0) as c:
                    rpc(c)
            else:
                rpc(clients[h])
            ok += 1
        except DynoError:
            pass
    return ok


@dataclass(frozen=True)
class Row:
    rpc: str
    latency_ms: float
    kind: str  # seq_cold | seq_warm | cluster_cold | cluster_warm
    mode: str
    seconds: float  # median of the repeats
    best_s: float
    ok: int
    hosts: int


def _cluster_ok(cluster: Cluster, rpc: Rpc) -> int:
    return sum(r.ok for r in cluster.call(rpc))


def run_round(hosts: list[Host], rpc_name: str, latency_ms: float, repeats: int, concurrency: int) -> list[Row]:
    make_rpc = RPCS[rpc_name]
    rpc = make_rpc()  # renewed before each timed run: one trace id per fan-out
    rows: list[Row] = []

    def row(kind: str, mode: str, times: list[float], ok: int) -> None:
        rows.append(Row(rpc_name, latency_ms, kind, mode, statistics.median(times), min(times), ok, len(hosts)))

    t, ok = _timed(lambda: sequential(hosts, None, rpc))
    row("seq_cold", "sequential, new channel per host", [t], ok)
    clients = {h: open_client(h, timeout_s=5.0) for h in hosts}
    try:
        rpc = make_rpc()
        sequential(hosts, clients, rpc)  # connect
        times = []
        for _ in range(max(1, repeats // 2)):
            rpc = make_rpc()
            t, ok = _timed(functools.partial(sequential, hosts, clients, rpc))
            times.append(t)
        row("seq_warm", "sequential, reused channels", times, ok)
    finally:
        for c in clients.values():
            c.close()
    with Cluster(hosts, deadline_s=10.0, max_concurrency=concurrency) as cluster:
        rpc = make_rpc()
        t, ok = _timed(functools.partial(_cluster_ok, cluster, rpc))
        row("cluster_cold", "Cluster, first call (connects)", [t], ok)
        times = []
        for _ in range(repeats):
            rpc = make_rpc()
            t, ok = _timed(functools.partial(_cluster_ok, cluster, rpc))
            times.append(t)
        row("cluster_warm", f"Cluster, reused channels (median of {repeats})", times, ok)
    return rows


def print_table(rows: list[Row]) -> None:
    print(f"{'rpc':<12} {'latency':>8}  {'mode':<40} {'seconds':>8} {'ms/host':>8} {'ok':>9}  speedup vs sequential")
    for r in rows:
        same = {x.kind: x.seconds for x in rows if (x.rpc, x.latency_ms) == (r.rpc, r.latency_ms)}
        speed = ""
        if r.kind == "cluster_cold":
            speed = f"{same['seq_cold'] / r.seconds:6.1f}x  (vs new channel per host)"
        elif r.kind == "cluster_warm":
            speed = f"{same['seq_warm'] / r.seconds:6.1f}x  (vs reused channels)"
        print(
            f"{r.rpc:<12} {r.latency_ms:>6g}ms  {r.mode:<40} {r.seconds:8.3f} {1000 * r.seconds / r.hosts:8.2f} "
            f"{r.ok:>4}/{r.hosts:<4}  {speed}"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", type=int, default=256, help="total daemons (default 256)")
    p.add_argument("--real", type=int, default=4, help="how many of them are real dynod processes (default 4)")
    p.add_argument("--groups", type=int, default=4, help="helper processes for the fake servers (default 4)")
    p.add_argument(
        "--latency-ms",
        default="0,5",
        help="comma-separated simulated per-request latencies of the fake servers (default 0,5)",
    )
    p.add_argument(
        "--rpc", default="status,start_trace", help="comma-separated RPCs to time: status, start_trace (default both)"
    )
    p.add_argument("--repeats", type=int, default=5, help="timed repeats of the warm runs (default 5)")
    p.add_argument("--max-concurrency", type=int, default=256)
    p.add_argument("--json", type=Path, help="also write the rows as JSON here")
    p.add_argument("--serve-fakes", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve_fakes is not None:
        return _serve_fakes(args.serve_fakes)
    rpcs = [x.strip() for x in args.rpc.split(",") if x.strip()]
    if not rpcs or set(rpcs) - set(RPCS):
        p.error(f"--rpc: choose from {', '.join(RPCS)}")
    latencies = [float(x) for x in args.latency_ms.split(",") if x.strip()]
    real: list[RealDynod] = []
    groups: list[FakeGroup] = []
    agents: list[BenchAgent] = []
    try:
        t0 = time.perf_counter()
        real = start_dynods(min(args.real, args.hosts))
        agents = [BenchAgent(r.dir / "agent.sock", rank) for rank, r in enumerate(real)]
        groups = start_fake_groups(args.hosts - len(real), args.groups) if args.hosts > len(real) else []
        hosts = [Host("127.0.0.1", r.port) for r in real] + [
            Host("127.0.0.1", port) for g in groups for port in g.ports
        ]
        print(
            f"{len(hosts)} daemons on loopback: {len(real)} real dynod processes + "
            f"{len(hosts) - len(real)} fake servers in {len(groups)} processes; {os.cpu_count()} CPUs; "
            f"started in {time.perf_counter() - t0:.1f} s; max_concurrency {args.max_concurrency}\n"
        )
        rows: list[Row] = []
        for latency in latencies:
            for g in groups:
                g.set_latency(latency)
            for rpc in rpcs:
                rows.extend(run_round(hosts, rpc, latency, args.repeats, args.max_concurrency))
        print_table(rows)
        if agents and "start_trace" in rpcs:
            print(
                f"\nreal dynods: {sum(a.requests for a in agents)} StartTrace requests matched a registered process "
                f"and reached its agent ({len(agents)} agents)"
            )
        if args.json:
            args.json.write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
    finally:
        for a in agents:
            a.close()
        for g in groups:
            if g.proc.stdin:
                g.proc.stdin.close()
        for r in real:
            r.proc.terminate()
        for g in groups:
            g.proc.wait(10)
        for r in real:
            r.proc.wait(15)
            shutil.rmtree(r.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

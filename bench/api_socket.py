"""What telling local callers apart costs (prints figures; no pass/fail), against a real dynod on loopback:

1. FetchTraceFile of one file through dynod's API Unix socket (relayed by its UnixFront) vs over loopback TCP, each
   in a fresh interpreter on a new connection as `dyno-cli` fetches; best and median of --repeats.
2. Unary latency (ListProcesses, which identifies its caller) over each transport: median and p99 of --calls.
3. The loopback TCP caller's lookup alone (sock_diag netlink, and /proc/net/tcp and tcp6 where netlink is refused),
   with N other established connections open.

    python bench/api_socket.py [--size-mb 200] [--repeats 3] [--calls 500] [--connections 0,1000,4000]
"""

from __future__ import annotations

import argparse
import ipaddress
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trace_latency import Daemon

from dyno.client.client import DynoClient
from dyno.daemon.peer_identity import TcpPeer, diag_socket_owner, proc_socket_owner
from dyno.v1 import dyno_pb2


def _fetch_once(port: str, via: str, trace_id: str, pid: str, out_dir: str) -> float:
    with DynoClient(f"127.0.0.1:{port}", timeout_s=30, via=via or None) as client:
        client.status()  # connected, as the CLI is after StartTrace / GetTrace
        t0 = time.monotonic()
        client.fetch_trace_file(trace_id, int(pid), out_dir)
        return time.monotonic() - t0


def _in_child(*args: str) -> float:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _fetch(d: Daemon, api_socket: Path, size_mb: int, repeats: int, out_dir: Path) -> None:
    block = bytes(range(256)) * 4096  # 1 MiB
    pid = 424242
    times: dict[str, list[float]] = {"tcp": [], "socket": []}
    for r in range(-1, repeats):  # r = -1: untimed, faults in the daemon's and the page cache's memory
        for kind, via in (("tcp", ""), ("socket", f"unix:{api_socket}")):
            trace_id = f"bench-api-{kind}-{r}"
            src = d.trace_dir / trace_id / f"{d.hostname}_{pid}.pt.trace.json.gz"
            src.parent.mkdir(parents=True, exist_ok=True)
            with open(src, "wb") as f:
                for _ in range(size_mb):
                    f.write(block)
            elapsed = _in_child("--fetch", str(d.port), via, trace_id, str(pid), str(out_dir))
            (out_dir / src.name).unlink()
            shutil.rmtree(src.parent)
            if r >= 0:
                times[kind].append(elapsed)
    mb = size_mb * 1.048576
    for kind, xs in times.items():
        print(
            f"FetchTraceFile {mb:.0f} MB over {kind:6}: best {min(xs):.3f} s = {mb / min(xs):.0f} MB/s, median "
            f"{statistics.median(xs):.3f} s ({', '.join(f'{x:.3f}' for x in xs)})"
        )
    print(f"  socket/TCP throughput, best vs best: {min(times['tcp']) / min(times['socket']) * 100:.0f}%")


def _latency(d: Daemon, api_socket: Path, calls: int) -> None:
    for kind, via in (("tcp", None), ("socket", f"unix:{api_socket}")):
        with DynoClient(f"127.0.0.1:{d.port}", timeout_s=10, via=via) as client:
            client.call(client.stub.ListProcesses, dyno_pb2.ListProcessesRequest())
            xs = []
            for _ in range(calls):
                t0 = time.perf_counter()
                client.call(client.stub.ListProcesses, dyno_pb2.ListProcessesRequest())
                xs.append(time.perf_counter() - t0)
        xs.sort()
        print(
            f"ListProcesses over {kind:6}: median {statistics.median(xs) * 1e3:.2f} ms, "
            f"p99 {xs[int(len(xs) * 0.99) - 1] * 1e3:.2f} ms ({calls} calls)"
        )


def _lookup(counts: list[int]) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4096)
    port = server.getsockname()[1]
    held: list[socket.socket] = []
    try:
        for n in counts:
            while len(held) < 2 * n:  # n connections: each has two ends in the table
                c = socket.create_connection(("127.0.0.1", port))
                held += [c, server.accept()[0]]
            probe = socket.create_connection(("127.0.0.1", port))
            accepted, (host, cport) = server.accept()
            peer = TcpPeer(ipaddress.ip_address(host), cport)
            server_end = [TcpPeer(peer.address, port)]
            for name, lookup in (
                ("sock_diag", lambda peer=peer, end=server_end: diag_socket_owner(peer, end)),
                ("/proc/net/tcp", lambda peer=peer: proc_socket_owner(peer, port)),
            ):
                xs = []
                for _ in range(50):
                    t0 = time.perf_counter()
                    assert lookup() is not None
                    xs.append(time.perf_counter() - t0)
                print(
                    f"loopback caller lookup, {name:13} with {n:5} other connections open: median "
                    f"{statistics.median(xs) * 1e3:.3f} ms"
                )
            probe.close()
            accepted.close()
    finally:
        for s in held:
            s.close()
        server.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--connections", default="0,1000,4000")
    ap.add_argument("--fetch", nargs=5, help=argparse.SUPPRESS)  # children of _in_child
    args = ap.parse_args()
    if args.fetch:
        print(_fetch_once(*args.fetch))
        return 0
    root = Path(tempfile.mkdtemp(prefix="dyno-bench-", dir="/tmp"))
    d = Daemon(root)
    api_socket = root / "dyno.sock"  # beside the agent socket, dynod's default
    try:
        out = root / "fetched"
        out.mkdir()
        _fetch(d, api_socket, args.size_mb, args.repeats, out)
        _latency(d, api_socket, args.calls)
    finally:
        d.stop()
        shutil.rmtree(root, ignore_errors=True)
    _lookup([int(n) for n in args.connections.split(",")])
    return 0


if __name__ == "__main__":
    sys.exit(main())

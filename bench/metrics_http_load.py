"""Threads and scrape time of the Prometheus endpoint under idle and slowloris connections (not a test).

Opens N connections that send nothing and N that send half a request head, then times real scrapes, for
dynod's server (dyno.daemon.metrics_http) and for prometheus_client's start_http_server (what dynod used before).

    python bench/metrics_http_load.py [--connections 200] [--scrapes 20]
"""

from __future__ import annotations

import argparse
import socket
import threading
import time
import urllib.request
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.exposition import start_http_server

from dyno.daemon.prometheus import serve_metrics


def _registry() -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    g = Gauge("dyno_bench_value", "value", ["gpu", "host"], registry=reg)
    for i in range(64):
        g.labels(gpu=str(i), host="node1").set(i)
    return reg


def _run(name: str, port: int, close: Callable[[], None], connections: int, scrapes: int) -> None:
    base = threading.active_count()
    socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(connections)]
    for _ in range(connections):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
        socks.append(s)
    times = []
    for _ in range(scrapes):
        t = time.perf_counter()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
            r.read()
        times.append((time.perf_counter() - t) * 1000)
    threads = threading.active_count() - base
    times.sort()
    print(
        f"{name:>24}: {2 * connections} idle/slow connections -> +{threads} threads; "
        f"scrape median {times[len(times) // 2]:.1f} ms, max {times[-1]:.1f} ms"
    )
    for s in socks:
        s.close()
    close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=200)
    ap.add_argument("--scrapes", type=int, default=20)
    args = ap.parse_args()
    reg = _registry()
    base = threading.active_count()
    ours = serve_metrics(reg, "127.0.0.1", 0)
    print(f"dyno MetricsHTTPServer started with +{threading.active_count() - base} thread(s)")
    _run("dyno MetricsHTTPServer", ours.port, ours.close, args.connections, args.scrapes)
    theirs, _ = start_http_server(0, addr="127.0.0.1", registry=reg)
    _run(
        "start_http_server",
        theirs.server_port,
        lambda: (theirs.shutdown(), theirs.server_close()),
        args.connections,
        args.scrapes,
    )


if __name__ == "__main__":
    main()

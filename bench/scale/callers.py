"""RPC callers, `threads` of them in this process, each on a connection of its own (as separate dyno-cli runs and
monitoring scripts are), calling ListProcesses, GetStatus and GetMetrics in turn for `seconds`: back to back, or
each caller starting a call every `pace_s` (a late call starts at once)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import grpc

from dyno.v1 import dyno_pb2, dyno_pb2_grpc

__all__ = ["RPCS", "run_callers"]

RPCS = ("ListProcesses", "GetStatus", "GetMetrics")


def run_callers(target: str, threads: int, seconds: float, pace_s: float, out: Path) -> None:
    """Writes `out`: {"ListProcesses": [latency s, ...], ..., "errors": {"RPC CODE": n}, "listed": [n, ...],
    "cpu_s": this process's CPU seconds}."""
    results: dict[str, list[float]] = {rpc: [] for rpc in RPCS}
    errors: dict[str, int] = {}
    listed: list[int] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def caller(k: int) -> None:
        options = [("grpc.use_local_subchannel_pool", 1), ("grpc.enable_http_proxy", 0)]
        with grpc.insecure_channel(target, options=options) as channel:
            stub = dyno_pb2_grpc.DynoStub(channel)
            calls = {
                "ListProcesses": lambda: len(stub.ListProcesses(dyno_pb2.ListProcessesRequest(), timeout=30).processes),
                "GetStatus": lambda: stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=30).registered_processes,
                "GetMetrics": lambda: len(stub.GetMetrics(dyno_pb2.GetMetricsRequest(limit=10), timeout=30).samples),
            }
            n = k
            next_call = time.monotonic() + pace_s * k / max(1, threads)  # spread over the pace
            while time.monotonic() < deadline:
                if pace_s:
                    time.sleep(max(0.0, next_call - time.monotonic()))
                    next_call += pace_s
                rpc = RPCS[n % len(RPCS)]
                n += 1
                started = time.monotonic()
                try:
                    value = calls[rpc]()
                except grpc.RpcError as e:
                    with lock:
                        key = f"{rpc} {e.code().name}"  # type: ignore[attr-defined]
                        errors[key] = errors.get(key, 0) + 1
                    continue
                took = time.monotonic() - started
                with lock:
                    results[rpc].append(took)
                    if rpc == "ListProcesses":
                        listed.append(value)

    workers = [threading.Thread(target=caller, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    cpu_s = time.process_time()  # this process's CPU time: the calls, their decoding, and the start-up
    out.write_text(json.dumps({**results, "errors": errors, "listed": listed, "cpu_s": cpu_s}))

#!/usr/bin/env python3
"""dynod's CPU time per unary call with one caller (no contention): what grpc's sync server and each handler cost
per call, apart from any load. Starts `python -m dyno.daemon` (bench/soak/dynod.py's config: 8 sim GPUs, 0.5 s
sampling, nothing registered), measures its idle CPU, then --calls calls of each RPC back to back from one thread
and prints dynod's CPU per call (its idle share subtracted) and the wall time per call. Asserts nothing.

    python bench/rpc_cpu_per_call.py [--calls 1000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import grpc
from bench_common import proc_cpu_s
from soak.dynod import Dynod

from dyno.v1 import dyno_pb2, dyno_pb2_grpc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=1000, help="calls of each RPC (default 1000)")
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="dyno-rpccpu-", dir="/tmp"))
    d = Dynod(root)
    d.start()
    try:
        with grpc.insecure_channel(d.target) as channel:
            stub = dyno_pb2_grpc.DynoStub(channel)
            time.sleep(3.0)  # the first samples
            start, cpu = time.monotonic(), proc_cpu_s(d.pid)
            time.sleep(5.0)
            idle = (proc_cpu_s(d.pid) - cpu) / (time.monotonic() - start)
            print(f"dynod idle: {100 * idle:.1f}% of a core; load average {os.getloadavg()[0]:.1f}")
            calls = {
                "GetStatus": lambda: stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=30),
                "ListProcesses": lambda: stub.ListProcesses(dyno_pb2.ListProcessesRequest(), timeout=30),
                "GetMetrics(limit=10)": lambda: stub.GetMetrics(dyno_pb2.GetMetricsRequest(limit=10), timeout=30),
            }
            for name, call in calls.items():
                call()
                start, cpu = time.monotonic(), proc_cpu_s(d.pid)
                for _ in range(args.calls):
                    call()
                wall = time.monotonic() - start
                per_call = ((proc_cpu_s(d.pid) - cpu) - idle * wall) / args.calls
                print(f"{name:<22} dynod CPU {1000 * per_call:.3f} ms/call, wall {1000 * wall / args.calls:.2f} ms")
    finally:
        d.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""dynod's peak memory when many clients send large requests at once (what connection_limits.MAX_REQUEST_BYTES
bounds): a real dynod (simulated GPUs, loopback, no token), N channels each sending a ~3 MB StartTrace three times
(the first refused is enough; the RPC needs the token only when one is set, GetMetrics never does). Prints dynod's
VmHWM (peak RSS) before and after, and the answers' status codes.

    python bench/big_requests.py [--clients 64]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
from collections import Counter
from pathlib import Path

import grpc
from bench_common import free_port

from dyno.daemon.process import DynodProcess
from dyno.v1 import dyno_pb2


def peak_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=64)
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="dyno-big-", dir="/tmp"))
    port = free_port()
    argv = ["--listen", "127.0.0.1", "--port", str(port), "--metrics-port", "0", "--gpu-backend", "sim"]
    argv += ["--state-dir", str(d / "s"), "--trace-dir", str(d / "t"), "--agent-socket", str(d / "a.sock")]
    argv += ["--kineto-endpoint", "off"]
    dynod = DynodProcess(argv).start()
    try:
        before = peak_kib(dynod.pid)
        big = dyno_pb2.TraceRequest(job_id="x", pids=list(range(1, 1_000_001))).SerializeToString()
        codes: Counter[str] = Counter()
        lock = threading.Lock()

        def client() -> None:
            with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 8 << 20)]) as ch:
                call = ch.unary_unary("/dyno.v1.Dyno/StartTrace", request_serializer=None, response_deserializer=None)
                for _ in range(3):
                    try:
                        call(big, timeout=60)
                        code = "OK"
                    except grpc.RpcError as e:
                        code = e.code().name
                    with lock:
                        codes[code] += 1

        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(f"request {len(big) / 1e6:.1f} MB x {args.clients} clients x 3: {dict(codes)}")
        print(f"dynod peak RSS: {before / 1024:.0f} MiB before, {peak_kib(dynod.pid) / 1024:.0f} MiB after")
    finally:
        dynod.stop()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()

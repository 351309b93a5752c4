"""RPC callers, `count` of them in this process, each on a connection of its own (as separate dyno-cli runs and
monitoring scripts are), calling ListProcesses, GetStatus and GetMetrics in turn for `seconds`: back to back, or
each caller starting a call every `pace_s` (a late call starts at once). Every answer is decoded in full.

The callers are asyncio tasks on one grpc.aio event loop per process, not a thread each: the same calls, answers and
decoding, at less of the cores that dynod shares with them (10 sync-client threads per process spent ~1.1 ms of CPU
per call, mostly grpc's per-call Python and the contention of the threads for their process's GIL)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import grpc

from dyno.v1 import dyno_pb2, dyno_pb2_grpc

__all__ = ["RPCS", "run_callers"]

RPCS = ("ListProcesses", "GetStatus", "GetMetrics")


def run_callers(target: str, count: int, seconds: float, pace_s: float, out: Path) -> None:
    """Writes `out`: {"ListProcesses": [latency s, ...], ..., "errors": {"RPC CODE": n}, "listed": [n, ...],
    "cpu_s": this process's CPU seconds in the calls}."""
    results: dict[str, list[float]] = {rpc: [] for rpc in RPCS}
    errors: dict[str, int] = {}
    listed: list[int] = []
    cpu_from = time.process_time()  # after the imports: the calls and their decoding, not the start-up
    asyncio.run(_callers(target, count, seconds, pace_s, results, errors, listed))
    cpu_s = time.process_time() - cpu_from
    out.write_text(json.dumps({**results, "errors": errors, "listed": listed, "cpu_s": cpu_s}))


async def _callers(
    target: str,
    count: int,
    seconds: float,
    pace_s: float,
    results: dict[str, list[float]],
    errors: dict[str, int],
    listed: list[int],
) -> None:
    deadline = time.monotonic() + seconds

    async def caller(k: int) -> None:
        options = [("grpc.use_local_subchannel_pool", 1), ("grpc.enable_http_proxy", 0)]
        async with grpc.aio.insecure_channel(target, options=options) as channel:
            stub = dyno_pb2_grpc.DynoStub(channel)
            n = k
            next_call = time.monotonic() + pace_s * k / max(1, count)  # spread over the pace
            while time.monotonic() < deadline:
                if pace_s:
                    await asyncio.sleep(max(0.0, next_call - time.monotonic()))
                    next_call += pace_s
                rpc = RPCS[n % len(RPCS)]
                n += 1
                started = time.monotonic()
                try:
                    if rpc == "ListProcesses":
                        answer = await stub.ListProcesses(dyno_pb2.ListProcessesRequest(), timeout=30)
                        listed.append(len(answer.processes))
                    elif rpc == "GetStatus":
                        await stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=30)
                    else:
                        await stub.GetMetrics(dyno_pb2.GetMetricsRequest(limit=10), timeout=30)
                except grpc.aio.AioRpcError as e:
                    key = f"{rpc} {e.code().name}"
                    errors[key] = errors.get(key, 0) + 1
                    continue
                results[rpc].append(time.monotonic() - started)

    await asyncio.gather(*(caller(k) for k in range(count)))

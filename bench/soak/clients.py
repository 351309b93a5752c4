"""dynod's clients: a tracer, dyno-cli-like calls, /metrics scrapers."""

from __future__ import annotations

import random
import socket
import time
import urllib.request
import uuid

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from dyno.v1 import dyno_pb2, dyno_pb2_grpc
from soak.dynod import Dynod
from soak.load import FETCH_CHUNK, KINETO_JOB_BASE, Load

__all__ = ["cli", "scraper", "traces_known", "tracer"]


def traces_known(d: Dynod, trace_ids: list[str]) -> int:
    with grpc.insecure_channel(d.target) as channel:
        stub = dyno_pb2_grpc.DynoStub(channel)
        known = 0
        for tid in trace_ids:
            try:
                stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id=tid), timeout=10)
                known += 1
            except grpc.RpcError:
                pass
    return known


def tracer(load: Load, rng: random.Random) -> None:
    """StartTrace for registered jobs, GetTrace until finished, FetchTraceFile (some dropped mid-stream), cancels."""
    channel = grpc.insecure_channel(load.d.target)
    stub = dyno_pb2_grpc.DynoStub(channel)
    while not load.stop.wait(rng.uniform(0.1, 0.4)):
        try:
            jobs = {p.job_id for p in stub.ListProcesses(dyno_pb2.ListProcessesRequest(), timeout=10).processes}
            jobs = {j for j in jobs if j.startswith("soak-agent-") or j.startswith(str(KINETO_JOB_BASE)[:4])}
            if not jobs:
                continue
            job = rng.choice(sorted(jobs))
            started = stub.StartTrace(
                dyno_pb2.TraceRequest(job_id=job, duration_ms=100, process_limit=rng.choice([0, 1, 2])), timeout=10
            )
            load.count("StartTrace")
            if started.triggered:
                with load.lock:
                    load.trace_ids.append(started.trace_id)
            if not started.triggered:
                continue
            if rng.random() < 0.1:
                stub.CancelTrace(dyno_pb2.CancelTraceRequest(trace_id=started.trace_id), timeout=10)
                load.count("CancelTrace")
            deadline = time.monotonic() + 8
            status = None
            while time.monotonic() < deadline and not load.stop.is_set():
                status = stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id=started.trace_id), timeout=10)
                load.count("GetTrace")
                if status.finished:
                    break
                time.sleep(0.2)
            if status is None:
                continue
            for p in status.processes:
                if p.state != dyno_pb2.TRACE_STATE_DONE:
                    continue
                chunks = stub.FetchTraceFile(
                    dyno_pb2.FetchTraceFileRequest(trace_id=started.trace_id, pid=p.pid, chunk_size=FETCH_CHUNK),
                    timeout=20,
                )
                drop = rng.random() < 0.3
                for _ in chunks:
                    if drop:
                        chunks.cancel()  # a client that goes away mid-file
                        break
                load.count("FetchTraceFile")
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:  # type: ignore[attr-defined]
                load.error(f"tracer {e.code().name}")  # type: ignore[attr-defined]
    channel.close()


def cli(load: Load, rng: random.Random) -> None:
    """dyno-cli-like unary calls: many on a fresh channel each (a CLI run), the rest on one kept channel."""
    kept = grpc.insecure_channel(load.d.target)
    while not load.stop.is_set():
        fresh = rng.random() < 0.3
        channel = grpc.insecure_channel(load.d.target) if fresh else kept
        stub = dyno_pb2_grpc.DynoStub(channel)
        what = rng.choice(["status", "version", "ps", "metrics", "health", "unknown trace", "stream"])
        try:
            if what == "status":
                stub.GetStatus(dyno_pb2.GetStatusRequest(), timeout=10)
            elif what == "version":
                stub.GetVersion(dyno_pb2.GetVersionRequest(), timeout=10)
            elif what == "ps":
                stub.ListProcesses(dyno_pb2.ListProcessesRequest(), timeout=10)
            elif what == "metrics":
                stub.GetMetrics(dyno_pb2.GetMetricsRequest(limit=rng.choice([1, 10, 60])), timeout=10)
            elif what == "health":
                health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
            elif what == "unknown trace":
                tid = f"soak-{uuid.uuid4().hex[:12]}"
                try:
                    stub.GetTrace(dyno_pb2.GetTraceRequest(trace_id=tid), timeout=10)
                except grpc.RpcError as e:
                    if e.code() != grpc.StatusCode.NOT_FOUND:  # type: ignore[attr-defined]
                        raise
            else:  # a `metrics --watch` view closed after a sample or two
                stream = stub.StreamMetrics(dyno_pb2.StreamMetricsRequest(), timeout=10)
                for i, _ in enumerate(stream):
                    if i >= rng.randrange(2):
                        stream.cancel()
                        break
            load.count(f"cli {what}")
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:  # type: ignore[attr-defined]
                load.error(f"cli {what} {e.code().name}")  # type: ignore[attr-defined]
        finally:
            if fresh:
                channel.close()
        time.sleep(rng.uniform(0.0, 0.03))
    kept.close()


def scraper(load: Load, rng: random.Random) -> None:
    url = f"http://127.0.0.1:{load.d.metrics_port}/metrics"
    while not load.stop.wait(rng.uniform(0.05, 0.2)):
        try:
            if rng.random() < 0.15:  # half a request, then gone
                with socket.create_connection(("127.0.0.1", load.d.metrics_port), timeout=5) as s:
                    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                load.count("scrape dropped")
            else:
                urllib.request.urlopen(url, timeout=10).read()
                load.count("scrape")
        except OSError:
            load.error("scrape")

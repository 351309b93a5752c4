"""In-process fake daemons for the `dyno-cli fetch` / ClusterTrace.attach() unit tests: each knows some trace ids
(others are NOT_FOUND, as after a daemon restart), runs two ranks per trace, and counts fetches and cancels."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc

from dyno.client.hosts import Host
from dyno.daemon.fake_server import FakeDynoServicer, serve, whole_file_chunk
from dyno.v1 import dyno_pb2

__all__ = ["KnownTraceServicer", "FakeDaemons", "sigterm_mid_fetch"]

DONE, RUNNING = dyno_pb2.TRACE_STATE_DONE, dyno_pb2.TRACE_STATE_RUNNING


class KnownTraceServicer(FakeDynoServicer):
    """Knows `traces` (ids started earlier by someone else). Its processes run until `finish_after` GetTrace calls
    have been answered (0: already done; None: never finish)."""

    def __init__(self, hostname: str, traces: set[str], finish_after: int | None = 0) -> None:
        super().__init__(hostname)
        self.traces = set(traces)
        self.finish_after = finish_after
        self.get_calls = 0
        self.cancelled = threading.Event()
        self.fetches: dict[int, int] = {}  # pid -> how many times its file was streamed
        self.created_ms = int(time.time() * 1000) - 5000

    def content(self, pid: int) -> bytes:
        return json.dumps({"traceEvents": [], "host": self.hostname, "pid": pid}).encode()

    def _known(self, trace_id: str, context: grpc.ServicerContext) -> None:
        if trace_id not in self.traces:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no trace {trace_id!r} on host {self.hostname}")

    def _done(self) -> bool:
        return self.finish_after is not None and self.get_calls >= self.finish_after

    def _status(self, trace_id: str) -> dyno_pb2.TraceStatus:
        state = DONE if self._done() else RUNNING
        procs = [
            dyno_pb2.ProcessTrace(
                pid=p.pid,
                job_id=self.job_id,
                rank=p.rank,
                protocol=dyno_pb2.PROTOCOL_AGENT,
                state=state,
                path=f"/tmp/dyno-traces/{trace_id}/{self.hostname}_{p.pid}.json",
                size_bytes=len(self.content(p.pid)) if state == DONE else 0,
            )
            for p in self._processes()
        ]
        request = dyno_pb2.TraceRequest(job_id=self.job_id, trace_id=trace_id, duration_ms=500)
        return dyno_pb2.TraceStatus(
            trace_id=trace_id,
            request=request,
            processes=procs,
            finished=state == DONE,
            created_ms=self.created_ms,
            hostname=self.hostname,
        )

    def GetTrace(self, request, context):  # noqa: N802 - grpc method name
        self._known(request.trace_id, context)
        status = self._status(request.trace_id)
        self.get_calls += 1
        return status

    def CancelTrace(self, request, context):  # noqa: N802
        self._known(request.trace_id, context)
        self.cancelled.set()
        return self._status(request.trace_id)

    def FetchTraceFile(self, request, context) -> Iterator[dyno_pb2.FileChunk]:  # noqa: N802
        self._known(request.trace_id, context)
        self.fetches[request.pid] = self.fetches.get(request.pid, 0) + 1
        data = self.content(request.pid)
        yield whole_file_chunk(data, f"{self.hostname}_{request.pid}.json")


class FakeDaemons:
    """Starts fake daemons on free loopback ports; stop() ends them all."""

    def __init__(self) -> None:
        self._pool = futures.ThreadPoolExecutor(max_workers=16)
        self._servers: list[grpc.Server] = []

    def start(self, traces: set[str], finish_after: int | None = 0) -> tuple[Host, KnownTraceServicer]:
        name = f"node{len(self._servers)}"
        fake = serve(lambda _port: KnownTraceServicer(name, traces, finish_after), executor=self._pool)
        self._servers.append(fake.server)
        return Host("127.0.0.1", fake.port), fake.servicer

    def stop(self) -> None:
        for s in self._servers:
            s.stop(0)
        self._pool.shutdown()


def sigterm_mid_fetch(
    daemons: FakeDaemons, out: Path, trace_id: str, launcher: list[str]
) -> tuple[int | None, dict[str, object], str]:
    """Run `dyno-cli fetch` of a trace whose processes never finish (``launcher``: the command line that runs the
    module `dyno.client` with the arguments that follow), send it SIGTERM once its "running" manifest exists, and
    return (its exit code, None when it outlived SIGTERM by 20 s; the manifest; its stderr)."""
    host, _ = daemons.start({trace_id}, finish_after=None)
    manifest = out / trace_id / "manifest.json"
    proc = subprocess.Popen(
        [*launcher, "fetch", "--host", str(host), "--trace-id", trace_id]
        + ["--output-dir", str(out), "--no-analyze", "--timeout-s", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not manifest.exists():  # the "running" manifest: fetch is following the host
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            return None, {}, ""
    finally:
        proc.kill()
        proc.wait()
    return proc.returncode, json.loads(manifest.read_text()), err


PYTHON_M_DYNO_CLIENT = [sys.executable, "-m", "dyno.client"]

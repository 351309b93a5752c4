"""A lightweight stand-in for dynod's Dyno service: fixed answers, no samplers, many per process.

For fan-out tests and benchmarks that need hundreds of endpoints on one machine, where hundreds of real dynod
processes do not fit. It speaks the same dyno.v1 wire contract, answers read-only RPCs from fixed data, and
accepts StartTrace / CancelTrace / FetchTraceFile (so auth interceptors can be tested in front of it). Many
servers share one thread pool; each listens on its own port and reports "fake-<port>" as its hostname.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import Generic, TypeVar

import grpc

from dyno import __version__, job_columns
from dyno.daemon.rpc_abort import abort
from dyno.filechunks import checksum_of, new_digest
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

__all__ = [
    "FAKE_TRACE_FILE",
    "FakeDynoServicer",
    "FakeServer",
    "fake_analysis",
    "serve",
    "start_fake_servers",
    "whole_file_chunk",
]

log = logging.getLogger(__name__)

FAKE_TRACE_FILE = b'{"traceEvents": []}\n'  # what FetchTraceFile sends, as "fake.json"


class FakeDynoServicer(dyno_pb2_grpc.DynoServicer):
    """Answers every Dyno RPC from fixed data. `delay_s` makes each unary call that slow (a "slow host")."""

    def __init__(
        self,
        hostname: str,
        *,
        delay_s: float = 0.0,
        job_id: str = "job1",
        nprocs: int = 2,
        jobs: int = 0,
        columnar: bool = True,
        analyses: bool = False,
    ) -> None:
        self.hostname = hostname
        self.jobs = jobs  # ListJobs answers this many ended records, "job-<i>" (the same ids on every fake host)
        self.analyses = analyses  # True: record i has fake_analysis(i) as its latest_analysis
        self.columnar = columnar  # False: ListJobs ignores `columnar` (answers records, as a dynod before it did)
        self.delay_s = delay_s
        self.job_id = job_id
        self.nprocs = nprocs
        self.started = time.monotonic()
        self.calls = 0
        self._lock = threading.Lock()

    def _enter(self, context: grpc.ServicerContext) -> None:
        with self._lock:
            self.calls += 1
        if self.delay_s > 0:
            # Honour cancellation so a slow fake does not hold pool threads after the client gave up.
            end = time.monotonic() + self.delay_s
            while context.is_active() and time.monotonic() < end:
                time.sleep(min(0.02, self.delay_s))

    def GetStatus(self, request: dyno_pb2.GetStatusRequest, context: grpc.ServicerContext) -> dyno_pb2.Status:
        self._enter(context)
        return dyno_pb2.Status(
            hostname=self.hostname,
            version=__version__,
            uptime_s=time.monotonic() - self.started,
            pid=os.getpid(),
            samplers=[
                dyno_pb2.SamplerState(name="host", ok=True, backend="fake"),
                dyno_pb2.SamplerState(name="gpu", ok=False, reason="fake server", backend="none"),
            ],
            registered_processes=self.nprocs,
            interval_s=1.0,
            history_s=3600.0,
        )

    def ListJobs(self, request: dyno_pb2.ListJobsRequest, context: grpc.ServicerContext) -> dyno_pb2.ListJobsResponse:
        return dyno_pb2.ListJobsResponse.FromString(self.ListJobsEncoded(request, context))

    def ListJobsEncoded(self, request: dyno_pb2.ListJobsRequest, context: grpc.ServicerContext) -> bytes:
        """`jobs` ended records in pages of 1000, or of job_columns.MAX_ROWS as columns when asked for (with their
        analyses' rules when asked for those too; filters not applied), sent as encoded (serve() registers it so): a
        page's bytes are built once for every fake server of the process (a fan-out benchmark of hundreds of servers
        holding thousands of records each), the host's own fields appended (protobuf merges concatenated messages)."""
        self._enter(context)
        start = int(request.page_token) if request.page_token.isdigit() else 0
        columnar = request.columnar and self.columnar
        rules = columnar and request.analysis_rules
        asked = min(self.jobs, start + (job_columns.MAX_ROWS if columnar else _JOB_PAGE))
        key = (start, asked, columnar, rules, self.analyses)  # the request's: a columnar page may end before `asked`
        kept = _JOB_PAGES.get(key)
        if kept is None:
            records = [fake_job_record("fake", i, self.analyses) for i in range(start, asked)]
            end = asked
            if columnar:
                end = start + job_columns.fitting(records, analysis_rules=rules)
                columns = job_columns.job_columns(records[: end - start], analysis_rules=rules)
                answer = dyno_pb2.ListJobsResponse(columns=columns)
                answer.columns.SetInParent()
            else:
                answer = dyno_pb2.ListJobsResponse(jobs=records)
            kept = _JOB_PAGES[key] = (answer.SerializeToString(), end)
        page, end = kept
        own = dyno_pb2.ListJobsResponse(hostname=self.hostname, next_page_token=str(end) if end < self.jobs else "")
        return page + own.SerializeToString()

    def GetVersion(self, request: dyno_pb2.GetVersionRequest, context: grpc.ServicerContext) -> dyno_pb2.VersionInfo:
        self._enter(context)
        return dyno_pb2.VersionInfo(version=__version__, api="dyno.v1", grpc=grpc.__version__)

    def GetMetrics(
        self, request: dyno_pb2.GetMetricsRequest, context: grpc.ServicerContext
    ) -> dyno_pb2.GetMetricsResponse:
        self._enter(context)
        sample = dyno_pb2.Sample(
            timestamp_ms=int(time.time() * 1000),
            metrics=[
                dyno_pb2.Metric(name="cpu_util_percent", value=12.5),
                dyno_pb2.Metric(name="gpu_utilization_percent", labels={"gpu": "0"}, value=87.0),
            ],
        )
        return dyno_pb2.GetMetricsResponse(samples=[sample], hostname=self.hostname)

    def _processes(self) -> list[dyno_pb2.ProcessInfo]:
        return [
            dyno_pb2.ProcessInfo(
                pid=1000 + r,
                job_id=self.job_id,
                rank=r,
                world_size=self.nprocs,
                gpu=r,
                protocol=dyno_pb2.PROTOCOL_AGENT,
                hostname=self.hostname,
            )
            for r in range(self.nprocs)
        ]

    def ListProcesses(
        self, request: dyno_pb2.ListProcessesRequest, context: grpc.ServicerContext
    ) -> dyno_pb2.ListProcessesResponse:
        self._enter(context)
        procs = [p for p in self._processes() if not request.job_id or p.job_id == request.job_id]
        return dyno_pb2.ListProcessesResponse(processes=procs, hostname=self.hostname)

    def StartTrace(self, request: dyno_pb2.TraceRequest, context: grpc.ServicerContext) -> dyno_pb2.StartTraceResponse:
        self._enter(context)
        if not request.job_id:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, "job_id is required")
        procs = [p for p in self._processes() if p.job_id == request.job_id]
        trace_id = request.trace_id or f"fake-{int(time.time() * 1000)}"
        return dyno_pb2.StartTraceResponse(
            trace_id=trace_id,
            matched_pids=[p.pid for p in procs],
            hostname=self.hostname,
            triggered=[
                dyno_pb2.ProcessTrace(pid=p.pid, job_id=p.job_id, rank=p.rank, state=dyno_pb2.TRACE_STATE_PENDING)
                for p in procs
            ],
        )

    def GetTrace(self, request: dyno_pb2.GetTraceRequest, context: grpc.ServicerContext) -> dyno_pb2.TraceStatus:
        self._enter(context)
        return dyno_pb2.TraceStatus(trace_id=request.trace_id, finished=True, hostname=self.hostname)

    def done_status(self, trace_id: str) -> dyno_pb2.TraceStatus:
        """A finished trace whose one process wrote FAKE_TRACE_FILE: for subclasses whose GetTrace has a file."""
        done = dyno_pb2.ProcessTrace(pid=1000, rank=0, state=dyno_pb2.TRACE_STATE_DONE, size_bytes=len(FAKE_TRACE_FILE))
        return dyno_pb2.TraceStatus(trace_id=trace_id, processes=[done], finished=True, hostname=self.hostname)

    def running_status(self, trace_id: str, cancelled: bool) -> dyno_pb2.TraceStatus:
        """The trace of every process of this fake: RUNNING, or CANCELLED and finished once `cancelled`: for
        subclasses whose traces run until CancelTrace."""
        state = dyno_pb2.TRACE_STATE_CANCELLED if cancelled else dyno_pb2.TRACE_STATE_RUNNING
        procs = [dyno_pb2.ProcessTrace(pid=p.pid, rank=p.rank, state=state) for p in self._processes()]
        return dyno_pb2.TraceStatus(trace_id=trace_id, processes=procs, finished=cancelled, hostname=self.hostname)

    def CancelTrace(self, request: dyno_pb2.CancelTraceRequest, context: grpc.ServicerContext) -> dyno_pb2.TraceStatus:
        self._enter(context)
        return dyno_pb2.TraceStatus(trace_id=request.trace_id, finished=True, hostname=self.hostname)

    def FetchTraceFile(
        self, request: dyno_pb2.FetchTraceFileRequest, context: grpc.ServicerContext
    ) -> Iterator[dyno_pb2.FileChunk]:
        self._enter(context)
        yield whole_file_chunk(FAKE_TRACE_FILE, "fake.json")


def whole_file_chunk(data: bytes, filename: str) -> dyno_pb2.FileChunk:
    """A FetchTraceFile answer in one chunk: the whole file, with its size and checksum."""
    return dyno_pb2.FileChunk(
        data=data,
        offset=0,
        last=True,
        total_size=len(data),
        filename=filename,
        checksum=checksum_of(new_digest(data)),
    )


S = TypeVar("S", bound=dyno_pb2_grpc.DynoServicer)


@dataclass
class FakeServer(Generic[S]):
    """One running fake endpoint."""

    server: grpc.Server
    port: int
    servicer: S

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self, grace: float | None = None) -> None:
        self.server.stop(grace).wait()

    def __enter__(self) -> FakeServer[S]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop(0)  # a with block's end stops it at once, not waiting for calls in flight


_JOB_PAGE = 1000
# (first, end asked for, columnar, analysis_rules, analyses) -> (the encoded page, the end it reached)
_JOB_PAGES: dict[tuple[int, int, bool, bool, bool], tuple[bytes, int]] = {}
_FAKE_RULES = ("dataloader", "sync-calls", "tiny-ops", "host-bound", "straggler", "exposed-comm")


def fake_analysis(i: int) -> dyno_pb2.TraceSummary | None:
    """Record i's latest analysis on a fake host: none for every 10th, FAILED (timed out) for every 50th (i % 50 ==
    1), else DONE with 3 rules (shares 0.05, 0.10, 0.15, the rules turning with i) and 8 ranks' step statistics; its
    trace ended when record i was last seen (fake_job_record)."""
    if i % 10 == 0:
        return None
    if i % 50 == 1:
        return dyno_pb2.TraceSummary(
            trace_id=f"periodic-job-{i}",
            state=dyno_pb2.ANALYSIS_STATE_FAILED,
            failure=dyno_pb2.ANALYSIS_FAILURE_TIMED_OUT,
            failure_message="worker killed",
            trace_finished_ms=_fake_last_seen_ms(i),
            analyzed_ms=i,
        )
    n = len(_FAKE_RULES)
    return dyno_pb2.TraceSummary(
        trace_id=f"periodic-job-{i}",
        state=dyno_pb2.ANALYSIS_STATE_DONE,
        trace_finished_ms=_fake_last_seen_ms(i),
        analyzed_ms=i,
        rules=[
            dyno_pb2.RuleLoss(rule=_FAKE_RULES[(i + k) % n], severity="HIGH", time_lost_share=0.05 * (k + 1), fix="fix")
            for k in range(3)
        ],
        ranks=[dyno_pb2.RankStepStats(rank=r, steps=5, mean_step_us=1e5, has_gpu=True) for r in range(8)],
    )


def _fake_last_seen_ms(i: int) -> int:
    return 1_700_003_600_000 + i * 1000


def fake_job_record(hostname: str, i: int, analysis: bool = False) -> dyno_pb2.JobRecord:
    """Record i of a fake host: 8 GPUs for an hour at a busy share that varies with i (deterministic); with
    `analysis`, fake_analysis(i) as its latest analysis."""
    r = dyno_pb2.JobRecord(
        job_id=f"job-{i}",
        user=f"user{i % 50}",
        hostname=hostname,
        first_seen_ms=1_700_000_000_000 + i * 1000,
        last_seen_ms=_fake_last_seen_ms(i),
        gpus_max=8,
        gpu_indices=range(8),
        gpu_seconds=8 * 3600.0,
        busy_gpu_seconds=8 * 3600.0 * ((i * 37) % 100) / 100,
        cpu_seconds=3600.0,
        ranks=range(8),
        pids=range(1000, 1008),
        pid_count=8,
        source="registered",
        record_id=i + 1,
    )
    latest = fake_analysis(i) if analysis else None
    if latest is not None:
        r.latest_analysis.CopyFrom(latest)
    return r


def start_fake_servers(
    count: int,
    *,
    host: str = "127.0.0.1",
    executor: futures.ThreadPoolExecutor | None = None,
    interceptors: Sequence[grpc.ServerInterceptor] = (),
    credentials: grpc.ServerCredentials | None = None,
    delay_s: float = 0.0,
    jobs: int = 0,
    columnar: bool = True,
    analyses: bool = False,
) -> list[FakeServer[FakeDynoServicer]]:
    """Start `count` fake servers on free ports of `host`, sharing `executor` (one is made if None)."""
    pool = executor or futures.ThreadPoolExecutor(max_workers=min(64, 4 + count), thread_name_prefix="fake-dyno")
    return [
        serve(
            lambda port: FakeDynoServicer(
                f"fake-{port}", delay_s=delay_s, jobs=jobs, columnar=columnar, analyses=analyses
            ),
            host=host,
            executor=pool,
            interceptors=interceptors,
            credentials=credentials,
        )
        for _ in range(count)
    ]


def serve(
    make_servicer: Callable[[int], S],
    *,
    host: str = "127.0.0.1",
    executor: futures.ThreadPoolExecutor | None = None,
    interceptors: Sequence[grpc.ServerInterceptor] = (),
    credentials: grpc.ServerCredentials | None = None,
) -> FakeServer[S]:
    """A Dyno servicer on a free port of `host` (`make_servicer(port)` builds it once the port is known); a pool
    of 8 threads is made when no `executor` is given."""
    pool = executor or futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="fake-dyno")
    server = grpc.server(pool, interceptors=list(interceptors), options=[("grpc.so_reuseport", 0)])
    address = f"{host}:0"
    port = server.add_secure_port(address, credentials) if credentials else server.add_insecure_port(address)
    servicer = make_servicer(port)
    dyno_pb2_grpc.add_DynoServicer_to_server(servicer, server)
    encoded = getattr(servicer, "ListJobsEncoded", None)
    if encoded is not None:  # bytes go out as they are (registering a method again replaces its handler)
        handler = grpc.unary_unary_rpc_method_handler(
            encoded, request_deserializer=dyno_pb2.ListJobsRequest.FromString, response_serializer=None
        )
        service = dyno_pb2.DESCRIPTOR.services_by_name["Dyno"].full_name
        server.add_registered_method_handlers(service, {"ListJobs": handler})
    server.start()
    return FakeServer(server, port, servicer)

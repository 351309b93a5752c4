"""DynoClient: a typed, thin wrapper over the dyno.v1 stub for one daemon, with deadlines on every call."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc

from dyno.client import pages
from dyno.client.errors import DynoError, ResourceExhausted, Unavailable, translate
from dyno.client.hosts import parse_host
from dyno.request_limits import MAX_METRICS_RESPONSE_BYTES
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

__all__ = ["DynoClient", "DEFAULT_PORT", "FetchedFile", "MAX_RECEIVE_BYTES", "dial_target"]

DEFAULT_PORT = 1778
MAX_RECEIVE_BYTES = 64 * 1024 * 1024  # largest answer accepted (dynod keeps GetMetrics to half of it)
T = TypeVar("T")
# dynod's hint on a refusal that is worth retrying soon (dyno.daemon.stream_slots.RETRY_AFTER_KEY; the wire name is
# the contract, the client does not import the daemon)
_RETRY_AFTER_KEY = "dyno-retry-after-ms"
_MAX_BUSY_WAIT_S = 2.0  # the longest single wait between tries of a busy daemon
# grpc's own name schemes (unix:/path, dns:///name:port, ipv4:addr:port...): given to grpc as they are
_GRPC_SCHEMES = ("dns:/", "unix:", "unix-abstract:", "ipv4:", "ipv6:", "vsock:", "xds:")


def dial_target(target: str) -> str:
    """`target` as grpc is to dial it: HOST[:PORT] checked as dyno-cli checks --host (HostSpecError, a ValueError,
    when malformed) and given dynod's port when it has none; a target with a grpc scheme as it is. grpc itself took
    "host:99999" and dialled port 99999 - 65536 (another server), and "host" alone went to port 443."""
    return target if target.startswith(_GRPC_SCHEMES) else parse_host(target).target


class _Busy(Exception):
    """The daemon refused the call for now (all its streams of the kind taken) and said when to try again."""

    def __init__(self, error: DynoError, retry_after_s: float) -> None:
        super().__init__(str(error))
        self.error, self.retry_after_s = error, retry_after_s


def _retry_hint_s(err: grpc.RpcError) -> float | None:
    """The daemon's retry hint in s, when `err` is a RESOURCE_EXHAUSTED that carries one."""
    if err.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    for key, value in err.trailing_metadata() or ():
        if key == _RETRY_AFTER_KEY:
            try:
                return max(0.0, int(value) / 1000)
            except ValueError:
                return None
    return None


def _busy_backoff_s(tries: int, first_s: float) -> float:
    """The wait after the `tries`-th refusal of a busy daemon: doubling from its hint, capped, with jitter so that
    the clients refused together do not come back together."""
    return min(_MAX_BUSY_WAIT_S, first_s * 2 ** (tries - 1)) * random.uniform(0.5, 1.0)


@dataclass(frozen=True)
class FetchedFile:
    path: Path
    size_bytes: int
    checksum: str  # "xxh3_128:<hex>" (dyno.filechunks), verified


class DynoClient:
    """Calls one dynod. Every call has a deadline (`timeout_s`); UNAVAILABLE is retried `retries` times with a
    short backoff (a daemon restarting). Failures raise dyno.client.errors.DynoError subclasses.

    `channel_credentials` (TLS) and `metadata` (e.g. a bearer token) come from dyno.client.auth when auth is on.
    """

    def __init__(
        self,
        target: str,
        *,
        timeout_s: float = 5.0,
        retries: int = 2,
        channel_credentials: grpc.ChannelCredentials | None = None,
        metadata: Sequence[tuple[str, str]] = (),
        options: Sequence[tuple[str, Any]] = (),
        via: str | None = None,
    ) -> None:
        """`via`: the address to dial instead of `target`, which still names the daemon (in errors, to callers):
        dynod's local Unix socket for the local host (dyno.client.local_socket)."""
        self.target = target = dial_target(target)
        address = via or target
        self.timeout_s = timeout_s
        self.retries = retries
        self._metadata = tuple(metadata)
        # errors read differently on a TLS channel and with a token (errors.translate)
        self.tls = channel_credentials is not None
        self.sends_token = any(key == "authorization" for key, _ in self._metadata)
        # lookahead: a new connection's stream window starts at 64 KiB and grows only as gRPC's BDP probe learns;
        # a CLI fetches on a fresh connection, and its first 200 MB stream ran at a fifth of the speed of later ones
        opts = [
            ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
            ("grpc.http2.lookahead_bytes", 8 * 1024 * 1024),
            # daemons are reached directly: grpc sent every call through $https_proxy / $http_proxy (set on login
            # nodes for pip and curl), and a running dynod read "cannot reach dynod" with the proxy's address;
            # grpc's own $grpc_proxy still routes them through a proxy for whoever needs one
            ("grpc.enable_http_proxy", 1 if os.environ.get("grpc_proxy") else 0),
            *options,
        ]
        if channel_credentials is not None:
            self._channel = grpc.secure_channel(address, channel_credentials, options=opts)
        else:
            self._channel = grpc.insecure_channel(address, options=opts)
        self.stub = dyno_pb2_grpc.DynoStub(self._channel)
        # FetchTraceFile with the responses left as bytes: decoded by dyno.filechunks without copying the data
        self._fetch_raw = self._channel.unary_stream(
            "/dyno.v1.Dyno/FetchTraceFile",
            request_serializer=dyno_pb2.FetchTraceFileRequest.SerializeToString,
            response_deserializer=None,
            _registered_method=True,
        )

    # -- plumbing ---------------------------------------------------------------------------------------------
    def _error(self, e: grpc.RpcError) -> DynoError:
        return translate(e, self.target, tls=self.tls, token=self.sends_token)

    def call(self, method: Callable[..., T], request: Any, *, timeout_s: float | None = None, retry: bool = True) -> T:
        """Unary call with deadline, retries on UNAVAILABLE and error translation."""
        timeout = timeout_s if timeout_s is not None else self.timeout_s
        deadline = time.monotonic() + timeout
        attempt = 0
        while True:
            try:
                return method(request, timeout=max(0.05, deadline - time.monotonic()), metadata=self._metadata)
            except grpc.RpcError as e:
                err = self._error(e)
                attempt += 1
                backoff = 0.1 * 2 ** (attempt - 1)
                if not (
                    retry
                    and isinstance(err, Unavailable)
                    and attempt <= self.retries
                    and time.monotonic() + backoff < deadline
                ):
                    raise err from None
                time.sleep(backoff)

    def stream(self, method: Callable[..., Any], request: Any, *, timeout_s: float | None = None) -> Iterator[Any]:
        """Server-streaming call; `timeout_s` None means no deadline (live views until cancelled)."""
        try:
            yield from method(request, timeout=timeout_s, metadata=self._metadata)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.CANCELLED:
                return
            raise self._error(e) from None

    # -- Dyno service -----------------------------------------------------------------------------------------
    def status(self) -> dyno_pb2.Status:
        return self.call(self.stub.GetStatus, dyno_pb2.GetStatusRequest())

    def version(self) -> dyno_pb2.VersionInfo:
        return self.call(self.stub.GetVersion, dyno_pb2.GetVersionRequest())

    def metrics(
        self,
        names: Sequence[str] = (),
        since_ms: int = 0,
        limit: int = 0,
        *,
        max_bytes: int = MAX_METRICS_RESPONSE_BYTES,
    ) -> dyno_pb2.GetMetricsResponse:
        """Samples from the daemon's history, oldest first: after `since_ms`, the newest `limit` (since_ms and limit
        0: the whole history). The daemon's pages are gathered into one answer of at most `max_bytes`; a range
        larger than that raises ResourceExhausted saying about how many of the newest samples would fit."""
        return pages.gather_metrics(
            lambda r: self.call(self.stub.GetMetrics, r), names, since_ms, limit, max_bytes, self.target
        )

    def stream_metrics(self, names: Sequence[str] = ()) -> Iterator[dyno_pb2.Sample]:
        return self.stream(self.stub.StreamMetrics, dyno_pb2.StreamMetricsRequest(names=list(names)))

    def health(self, service: str = "") -> str:
        """SERVING / NOT_SERVING / ... from grpc.health.v1."""
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        stub = health_pb2_grpc.HealthStub(self._channel)
        resp = self.call(stub.Check, health_pb2.HealthCheckRequest(service=service))
        return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)

    # -- tracing (processes, StartTrace / GetTrace / CancelTrace, FetchTraceFile) -----------------------------
    def list_processes(self, job_id: str = "") -> dyno_pb2.ListProcessesResponse:
        """Every registered process (of `job_id`), the daemon's pages gathered into one answer."""
        return pages.gather_processes(lambda r: self.call(self.stub.ListProcesses, r), job_id)

    def list_jobs(self, request: dyno_pb2.ListJobsRequest | None = None) -> dyno_pb2.ListJobsResponse:
        """Every job record matching `request`'s filters, the daemon's pages gathered into one answer."""
        return pages.gather_jobs(lambda r: self.call(self.stub.ListJobs, r), request or dyno_pb2.ListJobsRequest())

    def list_job_pages(self, request: dyno_pb2.ListJobsRequest) -> list[dyno_pb2.ListJobsResponse]:
        """Every page of ListJobs' answer to `request` as the daemon sent it: with `columnar` set, each page's
        records in its `columns` (a daemon older than that field answers `jobs`)."""
        return pages.job_pages(lambda r: self.call(self.stub.ListJobs, r), request)

    def start_trace(self, request: dyno_pb2.TraceRequest) -> dyno_pb2.StartTraceResponse:
        """The daemon's answer, with every triggered process (the rest of a large trace's from GetTrace pages)."""
        # Not retried: a retry after a lost reply would start a second trace.
        answer = self.call(self.stub.StartTrace, request, retry=False)
        if answer.next_page_token:
            answer.triggered.extend(pages.trace_pages(self._get_trace_page, answer.trace_id, answer.next_page_token))
            answer.next_page_token = ""
        return answer

    def get_trace(self, trace_id: str) -> dyno_pb2.TraceStatus:
        """The trace with all its processes, the daemon's pages gathered into one answer (`finished` is the first
        page's: true only when every process had ended before the first page was read)."""
        answer = self.call(self.stub.GetTrace, dyno_pb2.GetTraceRequest(trace_id=trace_id))
        return pages.rest_of_trace(self._get_trace_page, answer)

    def cancel_trace(self, trace_id: str) -> dyno_pb2.TraceStatus:
        answer = self.call(self.stub.CancelTrace, dyno_pb2.CancelTraceRequest(trace_id=trace_id))
        return pages.rest_of_trace(self._get_trace_page, answer)

    def get_trace_summary(self, trace_id: str, *, include_rank_parts: bool = False) -> dyno_pb2.TraceSummary:
        """This host's analysis of the trace (state PENDING / RUNNING / DONE / FAILED / DISABLED); with
        `include_rank_parts` also the ranks' parts (at most 3 MiB) that dyno.trace_analysis.part_codec decodes."""
        request = dyno_pb2.GetTraceSummaryRequest(trace_id=trace_id, include_rank_parts=include_rank_parts)
        return self.call(self.stub.GetTraceSummary, request)

    def _get_trace_page(self, request: dyno_pb2.GetTraceRequest) -> dyno_pb2.TraceStatus:
        return self.call(self.stub.GetTrace, request)

    def fetch_trace_file(
        self,
        trace_id: str,
        pid: int,
        dest_dir: str | os.PathLike[str],
        *,
        timeout_s: float = 600.0,
        on_chunk: Callable[[int], None] | None = None,
    ) -> FetchedFile:
        """Stream one trace file into dest_dir (temp name, then rename), verifying offsets, size and checksum.

        Memory stays at one chunk (<= 1 MiB); its data is written and hashed from a view into the received message
        (no copy; a writer thread measured no faster). `on_chunk(bytes_received_so_far)` runs after each chunk
        (progress views); an exception from it aborts the fetch (the partial file is removed) and propagates.
        A daemon with all its fetch streams taken refuses the stream with a retry hint: the fetch then waits
        (_busy_backoff_s: from the hint, doubling, at most 2 s, jittered), calls `on_chunk(0)` and tries again until
        `timeout_s` would be over; after that it raises ResourceExhausted naming the daemon and how long it tried.
        The first fetch raises glibc's malloc thresholds for the process (dyno.malloc_tuning: without it, every
        received MiB was page-faulted in anew, about half of the client's CPU time).
        """
        from dyno.malloc_tuning import tune_for_streaming  # ctypes: loaded by the commands that fetch, not all

        tune_for_streaming()
        dest = Path(dest_dir)
        dest.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout_s
        started, tries = time.monotonic(), 0
        while True:
            tries += 1
            try:
                return self._fetch_once(trace_id, pid, dest, deadline, on_chunk)
            except _Busy as busy:
                wait = _busy_backoff_s(tries, busy.retry_after_s)
                if time.monotonic() + wait >= deadline:
                    raise ResourceExhausted(
                        f"{busy.error.message} (still refused after {tries} tries in "
                        f"{time.monotonic() - started:.1f} s)",
                        self.target,
                        busy.error.code,
                    ) from None
                time.sleep(wait)
                if on_chunk is not None:
                    on_chunk(0)  # lets the caller abort while the daemon is busy, as it can between chunks

    def _fetch_once(
        self, trace_id: str, pid: int, dest: Path, deadline: float, on_chunk: Callable[[int], None] | None
    ) -> FetchedFile:
        """One FetchTraceFile stream into dest; raises _Busy when the daemon refused it as busy (nothing sent)."""
        from dyno.client.part_files import part_path, remove_stale_parts
        from dyno.filechunks import CHECKSUM_ALGORITHM, checksum_of, decode_chunk, new_digest  # xxhash

        tmp = part_path(dest, trace_id, pid)
        digest = new_digest()
        name, total, received, checksum = "", -1, 0, ""
        req = dyno_pb2.FetchTraceFileRequest(trace_id=trace_id, pid=pid)
        try:
            with open(tmp, "wb") as f:
                for message in self._fetch_stream(req, max(0.05, deadline - time.monotonic())):
                    try:
                        chunk = decode_chunk(message)
                    except ValueError as e:
                        raise DynoError(f"trace file stream of pid {pid}: {e}", self.target) from None
                    if chunk.offset != received:
                        raise DynoError(
                            f"trace file stream out of order: offset {chunk.offset}, expected {received}", self.target
                        )
                    if received == 0 and chunk.filename:
                        name, total = chunk.filename, chunk.total_size
                    f.write(chunk.data)
                    digest.update(chunk.data)
                    received += len(chunk.data)
                    if on_chunk is not None:
                        on_chunk(received)
                    if chunk.last:
                        checksum = chunk.checksum
                        break
            if not checksum:
                raise DynoError(f"trace file stream of pid {pid} ended without its final chunk", self.target)
            if not checksum.startswith(CHECKSUM_ALGORITHM + ":"):
                raise DynoError(
                    f"trace file of pid {pid}: the daemon's checksum {checksum.split(':')[0]!r} is not one this client"
                    f" knows ({CHECKSUM_ALGORITHM}); upgrade dyno on this machine",
                    self.target,
                )
            if checksum != checksum_of(digest) or (total >= 0 and received != total):
                raise DynoError(
                    f"trace file of pid {pid} is corrupt: checksum/size mismatch ({received} of {total} bytes)",
                    self.target,
                )
            path = dest / (Path(name).name or f"{trace_id}_{pid}.pt.trace.json")
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        remove_stale_parts(dest, trace_id, pid)
        return FetchedFile(path=path, size_bytes=received, checksum=checksum)

    def _fetch_stream(self, request: dyno_pb2.FetchTraceFileRequest, timeout_s: float) -> Iterator[bytes]:
        """FetchTraceFile's raw chunks; like stream(), but a refusal with the daemon's retry hint raises _Busy."""
        try:
            yield from self._fetch_raw(request, timeout=timeout_s, metadata=self._metadata)
        except grpc.RpcError as e:  # CANCELLED among them: a stopping dynod's (errors.py: Unavailable)
            retry_after_s = _retry_hint_s(e)
            if retry_after_s is not None:
                raise _Busy(self._error(e), retry_after_s) from None
            raise self._error(e) from None

    # -- lifecycle --------------------------------------------------------------------------------------------
    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> DynoClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""The Dyno gRPC servicer: converts proto <-> domain objects and maps errors; the logic lives elsewhere."""

from __future__ import annotations

import logging
import platform
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc

import dyno
from dyno.daemon import metrics_pages
from dyno.daemon.answer_bounds import fit_texts
from dyno.daemon.encoded_answers import EncodedAnswers
from dyno.daemon.history import History, name_filter
from dyno.daemon.metrics_pages import BadPageToken, PageToken, names_digest
from dyno.daemon.reflection_v1 import V1_SERVICE, V1ALPHA_SERVICE, add_v1_descriptor, v1_handler
from dyno.daemon.rpc_abort import abort
from dyno.daemon.stream_slots import MAX_METRIC_STREAMS, MAX_REFLECTION_STREAMS, StreamSlots
from dyno.daemon.wire import StoredEncoder, sample_messages
from dyno.error_reasons import ErrorReason
from dyno.request_limits import (
    MAX_METRICS_LIMIT,
    MAX_METRICS_PAGE_BYTES,
    MAX_NAME_PATTERN_LEN,
    MAX_NAME_PATTERNS,
)
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

__all__ = [
    "DynoServicer",
    "TraceRpcsProtocol",
    "add_to_server",
    "add_reflection",
    "DYNO_SERVICE",
    "MAX_METRIC_STREAMS",
]

log = logging.getLogger(__name__)

DYNO_SERVICE = dyno_pb2.DESCRIPTOR.services_by_name["Dyno"].full_name
_STREAM_POLL_S = 0.5
_MAX_PAGE_TOKEN = 256  # a token this daemon writes is ~70 characters
# the free texts each unary trace answer shortens when it would not fit MAX_METRICS_PAGE_BYTES
_TEXTS_TO_FIT: dict[str, tuple[str, tuple[str, ...]]] = {
    "StartTrace": ("triggered", ("error", "waiting")),
    "GetTrace": ("processes", ("error", "waiting")),
    "CancelTrace": ("processes", ("error", "waiting")),
}


class TraceRpcsProtocol(Protocol):
    """The tracing subsystem's RPCs (dyno.daemon.tracing.service.TraceRpcs)."""

    def ListProcesses(self, request: Any, context: grpc.ServicerContext) -> Any: ...
    def ListProcessesEncoded(self, request: Any, context: grpc.ServicerContext) -> bytes: ...
    def StartTrace(self, request: Any, context: grpc.ServicerContext) -> Any: ...
    def GetTrace(self, request: Any, context: grpc.ServicerContext) -> Any: ...
    def CancelTrace(self, request: Any, context: grpc.ServicerContext) -> Any: ...
    def FetchTraceFile(self, request: Any, context: grpc.ServicerContext) -> Any: ...


def _check_names(names: Any, context: grpc.ServicerContext) -> list[str]:
    names = list(names)
    if len(names) > MAX_NAME_PATTERNS:
        abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"names: at most {MAX_NAME_PATTERNS} patterns")
    for n in names:
        if not 1 <= len(n) <= MAX_NAME_PATTERN_LEN:
            abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"names: each pattern must be 1-{MAX_NAME_PATTERN_LEN} characters",
            )
    return names


class DynoServicer(dyno_pb2_grpc.DynoServicer):
    def __init__(
        self,
        status: Callable[[], dyno_pb2.Status],
        history: History,
        hostname: str,
        trace_rpcs: TraceRpcsProtocol | None = None,
        list_jobs: Callable[[dyno_pb2.ListJobsRequest, grpc.ServicerContext], bytes] | None = None,
        trace_summary: Callable[[dyno_pb2.GetTraceSummaryRequest, grpc.ServicerContext], dyno_pb2.TraceSummary]
        | None = None,
    ) -> None:
        self._status = status
        self._list_jobs = list_jobs
        self._trace_summary = trace_summary  # dyno.daemon.analysis.rpc.GetTraceSummaryRpc
        self._history = history
        self._encoder = StoredEncoder(history.series)
        self._answers = EncodedAnswers()  # GetMetrics' answers, each while its samples are the same (monitoring polls)
        self._hostname = hostname
        self._traces = trace_rpcs
        self._stopping = threading.Event()
        # Each live StreamMetrics holds one of the server's RPC threads until it ends; beyond this many the next is
        # refused, so open `dyno-cli metrics --watch` sessions can never leave status, health or tracing waiting.
        self._stream_slots = StreamSlots(MAX_METRIC_STREAMS, "live metric streams")

    def shutdown(self) -> None:
        """Ends the metric streams (within _STREAM_POLL_S): they never end by themselves, so the server's drain
        grace would otherwise always run out on an open `dyno-cli metrics --watch`."""
        self._stopping.set()

    def GetStatus(self, request: dyno_pb2.GetStatusRequest, context: grpc.ServicerContext) -> dyno_pb2.Status:
        return self._status()

    def GetVersion(self, request: dyno_pb2.GetVersionRequest, context: grpc.ServicerContext) -> dyno_pb2.VersionInfo:
        return dyno_pb2.VersionInfo(
            version=dyno.__version__, api=dyno.API_VERSION, python=platform.python_version(), grpc=grpc.__version__
        )

    def GetMetrics(
        self, request: dyno_pb2.GetMetricsRequest, context: grpc.ServicerContext
    ) -> dyno_pb2.GetMetricsResponse:
        return dyno_pb2.GetMetricsResponse.FromString(self.GetMetricsEncoded(request, context))

    def GetMetricsEncoded(self, request: dyno_pb2.GetMetricsRequest, context: grpc.ServicerContext) -> bytes:
        """GetMetrics as the encoded response, which add_to_server sends as it is (no parsed copy in memory): one
        page of at most MAX_METRICS_PAGE_BYTES (dyno.daemon.metrics_pages)."""
        names = _check_names(request.names, context)
        if request.since_ms < 0:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, "since_ms: must be >= 0 (unix ms)")
        if not 0 <= request.limit <= MAX_METRICS_LIMIT:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"limit: must be 0-{MAX_METRICS_LIMIT}")
        if len(request.page_token) > _MAX_PAGE_TOKEN:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, "page_token: not a next_page_token of this daemon")
        skip = 0
        if request.page_token:
            try:
                token = PageToken.decode(request.page_token, names)
            except BadPageToken as e:
                abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(e))
            stored = metrics_pages.select(self._history.stored(), token)
            until = token.until_ms
            if stored and stored[0].timestamp_ms == token.from_ms:  # else that sample has left the ring meanwhile
                skip = token.skip
        else:
            since_ms, limit = metrics_pages.first_page(request.since_ms, request.limit, request.whole_history)
            stored = self._history.stored(since_ms, limit)
            until = stored[-1].timestamp_ms if stored else 0
        key = (
            tuple(names),
            request.page_token,
            request.since_ms,
            request.limit,
            request.whole_history,
            skip,
            MAX_METRICS_PAGE_BYTES,
        )
        cached = self._answers.get(key, stored)
        if cached is not None:
            return cached
        keep = self._history.series.matching(names)
        page = self._encoder.page(stored, self._hostname, keep, MAX_METRICS_PAGE_BYTES, skip)
        if page.next_index is None:
            answer = page.with_token("")
        else:
            after = PageToken(stored[page.next_index].timestamp_ms, until, page.next_skip, names_digest(names))
            answer = page.with_token(after.encode())
        self._answers.put(key, stored, answer)
        return answer

    def StreamMetrics(
        self, request: dyno_pb2.StreamMetricsRequest, context: grpc.ServicerContext
    ) -> Iterator[dyno_pb2.Sample]:
        keep = name_filter(_check_names(request.names, context))
        self._stream_slots.take(context)
        return self._stream(request, keep, context)

    def _stream(
        self, request: dyno_pb2.StreamMetricsRequest, keep: Callable[[str], bool], context: grpc.ServicerContext
    ) -> Iterator[dyno_pb2.Sample]:
        sub = self._history.subscribe()
        try:
            while context.is_active():
                if self._stopping.is_set():
                    abort(context, grpc.StatusCode.UNAVAILABLE, "dynod is shutting down", ErrorReason.SHUTTING_DOWN)
                sample = sub.get(timeout=_STREAM_POLL_S)
                if sample is None:
                    continue
                # one message, or several of one timestamp for a sample too big for a stock client's 4 MiB
                yield from sample_messages(sample, keep if request.names else None, MAX_METRICS_PAGE_BYTES)
        finally:
            sub.close()

    def ListJobs(self, request: dyno_pb2.ListJobsRequest, context: grpc.ServicerContext) -> dyno_pb2.ListJobsResponse:
        return dyno_pb2.ListJobsResponse.FromString(self.ListJobsEncoded(request, context))

    def ListJobsEncoded(self, request: dyno_pb2.ListJobsRequest, context: grpc.ServicerContext) -> bytes:
        """ListJobs as the encoded response (`list_jobs`: dyno.daemon.jobs.service.ListJobsRpc.encoded), which
        add_to_server sends as it is."""
        if self._list_jobs is None:
            abort(context, grpc.StatusCode.UNIMPLEMENTED, "ListJobs: job accounting is not enabled in this daemon")
        return self._list_jobs(request, context)

    def GetTraceSummary(
        self, request: dyno_pb2.GetTraceSummaryRequest, context: grpc.ServicerContext
    ) -> dyno_pb2.TraceSummary:
        if self._trace_summary is None:
            abort(context, grpc.StatusCode.UNIMPLEMENTED, "GetTraceSummary: not served by this daemon")
        return self._trace_summary(request, context)

    def _tracing(self, name: str, context: grpc.ServicerContext) -> TraceRpcsProtocol:
        """The tracing RPCs, or `name` refused (TRACING_DISABLED) when this daemon does not trace."""
        if self._traces is None:
            abort(
                context,
                grpc.StatusCode.UNIMPLEMENTED,
                f"{name}: tracing is not enabled in this daemon",
                ErrorReason.TRACING_DISABLED,
            )
        return self._traces

    def _delegate(self, name: str, request: Any, context: grpc.ServicerContext) -> Any:
        answer = getattr(self._tracing(name, context), name)(request, context)
        bound = _TEXTS_TO_FIT.get(name)
        if bound is not None:  # within a stock client's 4 MiB however many processes (dyno.daemon.answer_bounds)
            fit_texts(answer, *bound, MAX_METRICS_PAGE_BYTES)
        return answer

    def ListProcesses(self, request, context):  # type: ignore[no-untyped-def]
        return self._delegate("ListProcesses", request, context)

    def ListProcessesEncoded(self, request: dyno_pb2.ListProcessesRequest, context: grpc.ServicerContext) -> bytes:
        """ListProcesses as the encoded answer (within the bound: dyno.daemon.trace_service), sent as it is."""
        return self._tracing("ListProcesses", context).ListProcessesEncoded(request, context)

    def StartTrace(self, request, context):  # type: ignore[no-untyped-def]
        return self._delegate("StartTrace", request, context)

    def GetTrace(self, request, context):  # type: ignore[no-untyped-def]
        return self._delegate("GetTrace", request, context)

    def CancelTrace(self, request, context):  # type: ignore[no-untyped-def]
        return self._delegate("CancelTrace", request, context)

    def FetchTraceFile(self, request, context):  # type: ignore[no-untyped-def]
        return self._delegate("FetchTraceFile", request, context)


def add_to_server(servicer: DynoServicer, server: grpc.Server) -> None:
    """Register the Dyno service, with FetchTraceFile's responses passed through as already-encoded FileChunk
    bytes (dyno.filechunks: one copy per MiB chunk instead of three), and GetMetrics' as encoded by the history
    (an answer near its 32 MiB bound took ~200 MB more as a parsed message), and ListProcesses' as joined from each
    process's cached encoding (dyno.daemon.trace_service), and ListJobs' as joined from the stored records' encodings
    (dyno.daemon.jobs.wire). Registering a method again replaces its
    handler (grpc keeps registered handlers in a dict, and looks there first for every call, registered or not)."""
    dyno_pb2_grpc.add_DynoServicer_to_server(servicer, server)
    fetch = grpc.unary_stream_rpc_method_handler(
        servicer.FetchTraceFile,
        request_deserializer=dyno_pb2.FetchTraceFileRequest.FromString,
        response_serializer=None,  # bytes go out as they are
    )
    handlers = {
        "FetchTraceFile": fetch,
        "GetMetrics": _encoded(servicer.GetMetricsEncoded, dyno_pb2.GetMetricsRequest),
        "ListProcesses": _encoded(servicer.ListProcessesEncoded, dyno_pb2.ListProcessesRequest),
        "ListJobs": _encoded(servicer.ListJobsEncoded, dyno_pb2.ListJobsRequest),
    }
    server.add_registered_method_handlers(DYNO_SERVICE, handlers)


def _encoded(behavior: Callable[[Any, grpc.ServicerContext], bytes], request_type: Any) -> grpc.RpcMethodHandler:
    """A unary handler of `behavior`, which returns its answer encoded: the bytes go out as they are."""
    return grpc.unary_unary_rpc_method_handler(
        behavior, request_deserializer=request_type.FromString, response_serializer=None
    )


class _CappedReflection:
    """grpc's reflection servicer behind a StreamSlots cap: ServerReflectionInfo is a bidi stream that holds its
    RPC thread for as long as the client keeps it open, idle or not (anyone who can reach the port)."""

    def __init__(self, service_names: Sequence[str]) -> None:
        self._inner = reflection.ReflectionServicer(tuple(service_names))
        self._slots = StreamSlots(MAX_REFLECTION_STREAMS, "reflection streams")

    def ServerReflectionInfo(self, request_iterator: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        self._slots.take(context)
        return self._inner.ServerReflectionInfo(request_iterator, context)  # type: ignore[no-any-return]


def add_reflection(server: grpc.Server, service_names: Sequence[str]) -> None:
    """Serve grpc reflection for `service_names` and both reflection services (grpc.reflection.v1 and v1alpha,
    dyno.daemon.reflection_v1), at most MAX_REFLECTION_STREAMS sessions at once over both."""
    names = tuple(dict.fromkeys((*service_names, V1_SERVICE, V1ALPHA_SERVICE)))
    add_v1_descriptor()
    capped = _CappedReflection(names)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(capped, server)
    server.add_generic_rpc_handlers((v1_handler(capped),))

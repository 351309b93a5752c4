"""The five tracing RPCs of the Dyno service, as a plain object the DynoServicer delegates to.

Converts proto <-> domain and maps errors: INVALID_ARGUMENT naming the field, NOT_FOUND for unknown trace ids
and pids, RESOURCE_EXHAUSTED for limits.
"""

from __future__ import annotations

import errno
import logging
import operator
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import grpc

from dyno.daemon import process_pages
from dyno.daemon import proto_convert as pc
from dyno.daemon.answer_bounds import cut_text
from dyno.daemon.callers import ADMIN, Caller
from dyno.daemon.registered_process import RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.rpc_abort import abort
from dyno.daemon.stream_slots import MAX_FETCH_STREAMS, StreamSlots
from dyno.daemon.tracing import pages as trace_pages
from dyno.daemon.tracing.access import (
    Denied,
    cancel_denied,
    fetch_denied,
    fetch_of_unknown_denied,
    unidentified_denied,
    visible_view,
)
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.process_listing import OTHERS_CMDLINE, ProcessFields, RolesCache, WholeListing, with_cmdline
from dyno.daemon.tracing.streaming import MAX_CHUNK, ChecksumCache, iter_chunks
from dyno.daemon.tracing.values import TraceLimitError, TraceRequestError, TraceView, UnknownTraceError
from dyno.diskspace import free_space_note
from dyno.error_reasons import ErrorReason
from dyno.filechunks import encode_chunk
from dyno.pbwire import len_field
from dyno.request_limits import MAX_METRICS_PAGE_BYTES
from dyno.v1 import dyno_pb2

__all__ = ["MAX_PROCESS_LIST_BYTES", "OTHERS_CMDLINE", "TraceRpcs"]

log = logging.getLogger(__name__)
_FETCH_RETRY_AFTER_MS = 200  # a client's first wait when the fetch streams are all taken (it backs off from there)
# ListProcesses answers at most this much: a stock gRPC client receives 4 MiB. A record is at most ~4.7 KB (agent
# cmdline 4096, job id 128, 32 ancestors) and any local user may Register pids on the agent socket (0666), so past
# the bound each command line is cut to its share of it (ending in "…"): every process is still listed, and the
# daemon never builds more than the bound.
MAX_PROCESS_LIST_BYTES = MAX_METRICS_PAGE_BYTES
# what a record takes besides its command line, at most (job id 128, hostname 256, 32 ancestors, numbers, tags)
_RECORD_BYTES = 768
_MIN_CMDLINE_BYTES = 256  # a command line is never cut shorter: past that, more pages
_MAX_PAGE_TOKEN = 512  # a token is the base64 of a job id (at most 128 characters) and a pid
_MAX_JOBS_BYTES = 256 << 10  # StartTraceResponse.registered_jobs, at most
_CMDLINE = operator.attrgetter("cmdline")  # in C: a Python function per record took a tenth of the GIL under load


class TraceRpcs:
    def __init__(
        self,
        manager: TraceManager,
        registry: ProcessRegistry,
        hostname: str,
        instance_id: str = "",
        caller_of: Callable[[grpc.ServicerContext], Caller] | None = None,
    ) -> None:
        self._tm = manager
        # who calls (dyno.daemon.callers): an admin touches every process, another local user only their own
        self._caller_of = caller_of or (lambda context: ADMIN)
        self._registry = registry
        self._hostname = hostname
        self._instance_id = instance_id  # dyno.daemon.instance_id: tells dyno-cli a restarted daemon from this one
        self._checksums = ChecksumCache()
        self._infos = ProcessFields()
        self._roles = RolesCache(manager.roles, manager.table.clock_ms)  # read when listing
        self._whole = WholeListing(self._infos)
        self._listing_lock = threading.Lock()  # the caches above, shared by the handler threads
        # each stream holds an RPC thread until the client has read the file (a slow link: minutes); refusals carry
        # a retry hint, on which DynoClient.fetch_trace_file waits and tries again
        self._fetch_slots = StreamSlots(MAX_FETCH_STREAMS, "trace file streams", retry_after_ms=_FETCH_RETRY_AFTER_MS)

    def ListProcesses(
        self, request: dyno_pb2.ListProcessesRequest, context: grpc.ServicerContext
    ) -> dyno_pb2.ListProcessesResponse:
        return dyno_pb2.ListProcessesResponse.FromString(self.ListProcessesEncoded(request, context))

    def ListProcessesEncoded(self, request: dyno_pb2.ListProcessesRequest, context: grpc.ServicerContext) -> bytes:
        """ListProcesses as the encoded answer, joined from each process's cached encoding (sent as it is:
        dyno.daemon.server.add_to_server); the whole registry's from the listing kept since the last call
        (process_listing.WholeListing)."""
        caller = self._caller_of(context)
        if len(request.page_token) > _MAX_PAGE_TOKEN:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, "page_token: not a next_page_token of ListProcesses")
        roles_version, procs = self._registry.listing(request.job_id)
        hostname = len_field(0x12, self._hostname.encode()) if self._hostname else b""  # hostname = 2
        if request.job_id:
            roles = self._tm.roles(procs)  # may read /proc: outside the lock, which only the shared caches need
            with self._listing_lock:
                return self._page(request, procs, roles, caller, context, hostname)
        with self._listing_lock:
            roles = self._roles.roles(roles_version, procs)
            self._infos.keep_only(procs)
            # a command line is at most 4 bytes a character: no need to add up their encodings to know that none is
            # cut (_page)
            if not request.page_token and _fits(sum(map(len, map(_CMDLINE, procs))) * 4, len(procs), len(hostname)):
                return self._whole.processes(procs, roles, caller) + hostname
            return self._page(request, procs, roles, caller, context, hostname)

    def _page(
        self,
        request: dyno_pb2.ListProcessesRequest,
        procs: list[RegisteredProcess],
        roles: dict[int, str],
        caller: Caller,
        context: grpc.ServicerContext,
        hostname: bytes,
    ) -> bytes:
        """The answer (its processes, `hostname` and next_page_token) of the page of `procs` that `request` asks
        for, each command line cut to its share of MAX_PROCESS_LIST_BYTES when all of them would not fit."""
        # one share for every page: the command lines of all the processes would not fit in one answer
        share = None
        if not _fits(sum(len(p.cmdline.encode()) for p in procs), len(procs), len(hostname)):
            share = max(_MIN_CMDLINE_BYTES, MAX_PROCESS_LIST_BYTES // len(procs) - _RECORD_BYTES)
        if request.page_token:
            try:
                after = process_pages.decode(request.page_token)
            except process_pages.BadProcessToken as e:
                abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(e))
            procs = [p for p in procs if (p.job_id, p.pid) > after]
        fields: list[bytes] = []
        token = b""
        size = len(self._hostname.encode()) + 2 * _MAX_PAGE_TOKEN
        last: RegisteredProcess | None = None
        for p in procs:  # built one at a time, never past the bound
            role = roles.get(p.pid, "")
            if share is not None and len(p.cmdline.encode()) > share and caller.may_touch(p.uid):
                msg, _ = self._infos.info(p, role)
                field = with_cmdline(msg, cut_text(msg.cmdline, share))
            else:
                field = self._infos.visible(p, role, caller)
            size += len(field)
            if size > MAX_PROCESS_LIST_BYTES and last is not None:
                token = len_field(0x1A, process_pages.encode(last.job_id, last.pid).encode())  # next_page_token = 3
                break
            fields.append(field)
            last = p
        return b"".join(fields) + hostname + token

    def StartTrace(self, request: dyno_pb2.TraceRequest, context: grpc.ServicerContext) -> dyno_pb2.StartTraceResponse:
        caller = self._caller_of(context)
        _refuse(context, unidentified_denied(caller, "start traces"))
        try:
            result = self._tm.start(pc.spec_from_pb(request), only_uid=None if caller.admin else caller.uid)
        except TraceRequestError as e:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(e), e.reason)
        except TraceLimitError as e:
            abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, str(e), ErrorReason.TOO_MANY_TRACES)
        except OSError as e:
            problem = _trace_dir_problem(e)
            log.error("StartTrace: cannot prepare the trace dir: %s", problem)
            abort(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                f"cannot prepare the trace dir on this host: {problem}",
                ErrorReason.TRACE_DIR_UNUSABLE,
            )
        answer = dyno_pb2.StartTraceResponse(
            trace_id=result.trace_id,
            matched_pids=list(result.matched_pids),
            busy_pids=list(result.busy_pids),
            message=result.message,
            registered_jobs=_some_jobs(result.registered_jobs),
            hostname=self._hostname,
            instance_id=self._instance_id,
        )
        # the first page of the trace's processes; GetTrace gives the rest (trace_pages)
        first = trace_pages.page(
            [pc.process_trace_to_pb(v) for v in result.triggered], "", MAX_PROCESS_LIST_BYTES, answer.ByteSize()
        )
        answer.triggered.extend(first.processes)
        answer.next_page_token = first.next_page_token
        return answer

    def GetTrace(self, request: dyno_pb2.GetTraceRequest, context: grpc.ServicerContext) -> dyno_pb2.TraceStatus:
        caller = self._caller_of(context)
        return self._status(self._tm.get, request.trace_id, context, caller, request.page_token)

    def CancelTrace(self, request: dyno_pb2.CancelTraceRequest, context: grpc.ServicerContext) -> dyno_pb2.TraceStatus:
        caller = self._caller_of(context)
        if not caller.admin:
            _refuse(context, unidentified_denied(caller, "cancel traces"))
            _require_id(request.trace_id, context)
            _refuse(context, cancel_denied(caller, self._status_view(request.trace_id, context)))
        return self._status(self._tm.cancel, request.trace_id, context, caller)

    def _status_view(self, trace_id: str, context: grpc.ServicerContext) -> TraceView:
        try:
            return self._tm.get(trace_id)
        except UnknownTraceError as e:
            abort(context, grpc.StatusCode.NOT_FOUND, str(e), e.reason)

    def _status(
        self,
        op: Callable[[str], TraceView],
        trace_id: str,
        context: grpc.ServicerContext,
        caller: Caller,
        page_token: str = "",
    ) -> dyno_pb2.TraceStatus:
        """`op`'s view of the trace as a TraceStatus, as much of it as `caller` may see (access.visible_view): the
        page that `page_token` names (trace_pages)."""
        _require_id(trace_id, context)
        if len(page_token) > trace_pages.MAX_TOKEN_CHARS:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, "page_token: not a next_page_token of this trace")
        try:
            status = pc.trace_view_to_pb(visible_view(caller, op(trace_id)), self._hostname)
        except UnknownTraceError as e:
            abort(context, grpc.StatusCode.NOT_FOUND, str(e), e.reason)
        status.instance_id = self._instance_id
        processes = list(status.processes)
        del status.processes[:]
        try:
            part = trace_pages.page(processes, page_token, MAX_PROCESS_LIST_BYTES, status.ByteSize())
        except trace_pages.BadTraceToken as e:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(e))
        status.processes.extend(part.processes)
        status.next_page_token = part.next_page_token
        return status

    def FetchTraceFile(self, request: dyno_pb2.FetchTraceFileRequest, context: grpc.ServicerContext) -> Iterator[bytes]:
        """Encoded FileChunk messages (dyno.filechunks; served with a pass-through serializer, see
        dyno.daemon.server.add_to_server)."""
        _require_id(request.trace_id, context)
        if request.pid <= 0:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, "pid: required (> 0)")
        if request.chunk_size > MAX_CHUNK:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"chunk_size: at most {MAX_CHUNK}")
        caller = self._caller_of(context)
        known = caller.admin or self._check_fetch(caller, request.trace_id, request.pid, context)
        try:
            path = self._tm.trace_file(request.trace_id, request.pid)
        except TraceRequestError as e:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(e), e.reason)
        except UnknownTraceError as e:
            abort(context, grpc.StatusCode.NOT_FOUND, str(e), e.reason)
        if not known:
            _refuse(context, fetch_of_unknown_denied(caller, path, request.trace_id, request.pid))
        self._fetch_slots.take(context)
        return self._stream(path, request.chunk_size, context)

    def _check_fetch(self, caller: Caller, trace_id: str, pid: int, context: grpc.ServicerContext) -> bool:
        """PERMISSION_DENIED unless the traced process ran as the calling user; False when dynod does not know the
        process's part in the trace (then the file's owner decides)."""
        _refuse(context, unidentified_denied(caller, "fetch trace files"))
        try:
            view: TraceView | None = self._tm.get(trace_id)
        except (UnknownTraceError, ValueError):
            view = None
        known, denied = fetch_denied(caller, view, trace_id, pid)
        _refuse(context, denied)
        return known

    def _stream(self, path: Path, chunk_size: int, context: grpc.ServicerContext) -> Iterator[bytes]:
        try:
            for c in iter_chunks(path, chunk_size or MAX_CHUNK, self._checksums):
                yield encode_chunk(
                    c.data, c.offset, c.last, checksum=c.checksum, total_size=c.total_size, filename=c.filename
                )
        except OSError as e:  # removed by retention mid-stream, or unreadable
            abort(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"trace file unreadable: {e.strerror or e}",
                ErrorReason.NO_TRACE_FILE,
            )


def _fits(cmdline_bytes: int, processes: int, hostname_bytes: int) -> bool:
    """Whether processes with this many bytes of command lines in all surely fit in one answer, uncut, beside the
    answer's hostname field and room for a page token (what _page reserves)."""
    return cmdline_bytes + processes * _RECORD_BYTES + hostname_bytes + 2 * _MAX_PAGE_TOKEN <= MAX_PROCESS_LIST_BYTES


def _some_jobs(jobs: Sequence[str]) -> list[str]:
    """The first of the registered `jobs` that fit in _MAX_JOBS_BYTES (a hint for people: any local user may
    register processes, each of another job id of up to 128 characters)."""
    out: list[str] = []
    size = 0
    for job in jobs:
        size += len(job.encode()) + 3
        if size > _MAX_JOBS_BYTES:
            break
        out.append(job)
    return out


def _trace_dir_problem(e: OSError) -> str:
    """'<path>: <reason>', with the free space when the disk is full (the usual cause)."""
    where = f"{e.filename}: " if e.filename else ""
    note = free_space_note(Path(e.filename).parent) if e.errno == errno.ENOSPC and e.filename else ""
    return f"{where}{e.strerror or e}" + (f" ({note})" if note else "")


def _refuse(context: grpc.ServicerContext, denied: Denied | None) -> None:
    if denied is not None:
        abort(context, grpc.StatusCode.PERMISSION_DENIED, denied.message, denied.reason)


def _require_id(trace_id: str, context: grpc.ServicerContext) -> None:
    if not trace_id:
        abort(context, grpc.StatusCode.INVALID_ARGUMENT, "trace_id: required")

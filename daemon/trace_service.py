"""The five tracing RPCs of the Dyno service, as a plain object the DynoServicer delegates to.

Converts proto <-> domain and maps errors: INVALID_ARGUMENT naming the field, NOT_FOUND for unknown trace ids
and pids, RESOURCE_EXHAUSTED for limits.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc

from dyno.daemon import proto_convert as pc
from dyno.daemon.registry import ProcessRecord, ProcessRegistry
from dyno.daemon.rpc_abort import abort
from dyno.daemon.stream_slots import MAX_FETCH_STREAMS, StreamSlots
from dyno.daemon.trace_files import MAX_CHUNK, ChecksumCache, iter_chunks
from dyno.daemon.trace_manager import TraceManager
from dyno.daemon.trace_types import TraceLimitError, TraceRequestError, TraceView, UnknownTraceError
from dyno.diskspace import free_space_note
from dyno.filechunks import encode_chunk
from dyno.v1 import dyno_pb2

__all__ = ["MAX_PROCESS_LIST_BYTES", "TraceRpcs"]

log = logging.getLogger(__name__)
_FETCH_RETRY_AFTER_MS = 200  # a client's first wait when the fetch streams are all taken (it backs off from there)
# ListProcesses answers at most this much (a record is at most ~4.7 KB: agent cmdline 4096, job id 128, 32 ancestors).
# Any local user may Register pids on the agent socket (0666) and the registry has no count cap, so without it a
# flood made an answer no client accepts (dyno-cli: 64 MiB), which the daemon built in full first.
MAX_PROCESS_LIST_BYTES = 16 * 1024 * 1024


class _ProcessInfoCache:
    """Each registered process's ProcessInfo message and its encoded size, built again only when its record changed
    (records are frozen: a change is a new object) or its role did. **Why:** building ~1,000 messages field by field
    took ~50 ms of the GIL per ListProcesses, and a record changes only every few seconds (its polls, keepalives)."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[ProcessRecord, str, dyno_pb2.ProcessInfo, int]] = {}

    def info(self, p: ProcessRecord, role: str) -> tuple[dyno_pb2.ProcessInfo, int]:
        """The message (never changed after: callers copy it into their answer) and its encoded size."""
        hit = self._entries.get(p.pid)
        if hit is not None and hit[0] is p and hit[1] == role:
            return hit[2], hit[3]
        msg = pc.process_to_pb(p, role)
        size = msg.ByteSize()
        self._entries[p.pid] = (p, role, msg, size)
        return msg, size

    def keep_only(self, procs: list[ProcessRecord]) -> None:
        """Forget the pids that are not in `procs` (all registered processes) once they are most of the cache."""
        if len(self._entries) > 2 * len(procs) + 64:
            live = {p.pid for p in procs}
            self._entries = {pid: e for pid, e in list(self._entries.items()) if pid in live}


class TraceRpcs:
    def __init__(self, manager: TraceManager, registry: ProcessRegistry, hostname: str, instance_id: str = "") -> None:
        self._tm = manager
        self._registry = registry
        self._hostname = hostname
        self._instance_id = instance_id  # dyno.daemon.instance_id: tells dyno-cli a restarted daemon from this one
        self._checksums = ChecksumCache()
        self._infos = _ProcessInfoCache()
        # each stream holds an RPC thread until the client has read the file (a slow link: minutes); refusals carry
        # a retry hint, on which DynoClient.fetch_trace_file waits and tries again
        self._fetch_slots = StreamSlots(MAX_FETCH_STREAMS, "trace file streams", retry_after_ms=_FETCH_RETRY_AFTER_MS)

    def ListProcesses(
        self, request: dyno_pb2.ListProcessesRequest, context: grpc.ServicerContext
    ) -> dyno_pb2.ListProcessesResponse:
        procs = self._registry.list(request.job_id)
        roles = self._tm.roles(procs)
        answer = dyno_pb2.ListProcessesResponse(hostname=self._hostname)
        if not request.job_id:
            self._infos.keep_only(procs)
        size = 0
        for p in procs:  # built one at a time, so a refusal costs at most the bound
            msg, msg_size = self._infos.info(p, roles.get(p.pid, ""))
            size += msg_size + 4  # + its field tag and length
            if size > MAX_PROCESS_LIST_BYTES:
                what = f"job {request.job_id!r}" if request.job_id else "all jobs"
                abort(
                    context,
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"the {len(procs)} processes registered for {what} are more than one answer may carry "
                    f"({MAX_PROCESS_LIST_BYTES >> 20} MiB): ask for one job (job_id)",
                )
            answer.processes.append(msg)
        return answer

    def StartTrace(self, request: dyno_pb2.TraceRequest, context: grpc.ServicerContext) -> dyno_pb2.StartTraceResponse:
        try:
            result = self._tm.start(pc.spec_from_pb(request))
        except TraceRequestError as e:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except TraceLimitError as e:
            abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
        except OSError as e:
            problem = _trace_dir_problem(e)
            log.error("StartTrace: cannot prepare the trace dir: %s", problem)
            abort(context, grpc.StatusCode.FAILED_PRECONDITION, f"cannot prepare the trace dir on this host: {problem}")
        return dyno_pb2.StartTraceResponse(
            trace_id=result.trace_id,
            matched_pids=list(result.matched_pids),
            triggered=[pc.process_trace_to_pb(v) for v in result.triggered],
            busy_pids=list(result.busy_pids),
            message=result.message,
            registered_jobs=list(result.registered_jobs),
            hostname=self._hostname,
            instance_id=self._instance_id,
        )

    def GetTrace(self, request: dyno_pb2.GetTraceRequest, context: grpc.ServicerContext) -> dyno_pb2.TraceStatus:
        return self._status(self._tm.get, request.trace_id, context)

    def CancelTrace(self, request: dyno_pb2.CancelTraceRequest, context: grpc.ServicerContext) -> dyno_pb2.TraceStatus:
        return self._status(self._tm.cancel, request.trace_id, context)

    def _status(
        self, op: Callable[[str], TraceView], trace_id: str, context: grpc.ServicerContext
    ) -> dyno_pb2.TraceStatus:
        _require_id(trace_id, context)
        try:
            status = pc.trace_view_to_pb(op(trace_id), self._hostname)
        except UnknownTraceError as e:
            abort(context, grpc.StatusCode.NOT_FOUND, str(e))
        status.instance_id = self._instance_id
        return status

    def FetchTraceFile(self, request: dyno_pb2.FetchTraceFileRequest, context: grpc.ServicerContext) -> Iterator[bytes]:
        """Encoded FileChunk messages (dyno.filechunks; served with a pass-through serializer, see
        dyno.daemon.server.add_to_server)."""
        _require_id(request.trace_id, context)
        if request.pid <= 0:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, "pid: required (> 0)")
        if request.chunk_size > MAX_CHUNK:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"chunk_size: at most {MAX_CHUNK}")
        try:
            path = self._tm.trace_file(request.trace_id, request.pid)
        except TraceRequestError as e:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except UnknownTraceError as e:
            abort(context, grpc.StatusCode.NOT_FOUND, str(e))
        self._fetch_slots.take(context)
        return self._stream(path, request.chunk_size, context)

    def _stream(self, path: Path, chunk_size: int, context: grpc.ServicerContext) -> Iterator[bytes]:
        try:
            for c in iter_chunks(path, chunk_size or MAX_CHUNK, self._checksums):
                yield encode_chunk(
                    c.data, c.offset, c.last, checksum=c.checksum, total_size=c.total_size, filename=c.filename
                )
        except OSError as e:  # removed by retention mid-stream, or unreadable
            abort(context, grpc.StatusCode.NOT_FOUND, f"trace file unreadable: {e.strerror or e}")


def _trace_dir_problem(e: OSError) -> str:
    """'<path>: <reason>', with the free space when the disk is full (the usual cause)."""
    where = f"{e.filename}: " if e.filename else ""
    note = free_space_note(Path(e.filename).parent) if e.errno == errno.ENOSPC and e.filename else ""
    return f"{where}{e.strerror or e}" + (f" ({note})" if note else "")


def _require_id(trace_id: str, context: grpc.ServicerContext) -> None:
    if not trace_id:
        abort(context, grpc.StatusCode.INVALID_ARGUMENT, "trace_id: required")

"""The Agent gRPC service (Register, Watch, ReportTrace): proto conversion and status codes over the trace manager
and the admission checks (agent_admission.py); served by agent_server.AgentServer on a local Unix domain socket.

An open Watch stream is the agent's liveness signal: when it ends, the process is gone for us (a running trace
fails with "process exited or disconnected mid-trace"); the agent reconnects and registers again by itself.

Served by grpc.aio on an event loop of its own thread (dyno.daemon.aio_serving): every registered trainer holds a
Watch stream for its whole life, which must not cost a thread. Register and ReportTrace are fast plain functions
run on the loop.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import secrets
import threading
from collections.abc import AsyncIterator
from typing import NoReturn

import grpc

import dyno
from dyno.daemon import proto_convert as pc
from dyno.daemon.agent_admission import MAX_TEXT, Admission, Refusal, RefusalKind, RefusalReason
from dyno.daemon.aio_serving import TIMED_OUT, WakingQueue, next_item
from dyno.daemon.job_users import JobOfAnotherUserError
from dyno.daemon.peer_identity import PeerTable
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry, RegistryFullError
from dyno.daemon.rpc_abort import abort, reason_trailer
from dyno.daemon.tracing.agent_side import GONE_REASON
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import (
    AgentCancelCommand,
    AgentCommand,
    AgentTraceCommand,
    TraceRequestError,
    TraceState,
    UnknownTraceError,
)
from dyno.error_reasons import ErrorReason
from dyno.logthrottle import ThrottledLog
from dyno.v1 import agent_pb2, agent_pb2_grpc

__all__ = ["AgentServicer", "GONE_REASON"]

log = logging.getLogger(__name__)


class AgentServicer(agent_pb2_grpc.AgentServicer):
    def __init__(
        self,
        manager: TraceManager,
        registry: ProcessRegistry,
        *,
        keepalive_ms: int = 5000,
        peers: PeerTable | None = None,
    ) -> None:
        self._tm = manager
        # the callers' credentials, when the socket is served through a UnixFront (AgentServer with `peers`): then a
        # pid is registered only by its own user or root. None: anyone may register any live process
        self._peers = peers
        self._registry = registry
        self._keepalive_s = keepalive_ms / 1000
        self._keepalive_ms = keepalive_ms
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._queues: set[queue.Queue[AgentCommand | None]] = set()
        self._full_log = ThrottledLog(log, every_s=600.0)  # refusals others can cause at will
        self._refused_log = ThrottledLog(log, every_s=600.0)  # reports without their registration's session
        self._admission = Admission(registry, checks_owner=peers is not None)

    def shutdown(self) -> None:
        """Ends every Watch stream promptly (server stop)."""
        self._stopping.set()
        with self._lock:
            for q in self._queues:
                q.put(None)

    def Register(self, request: agent_pb2.RegisterRequest, context: grpc.ServicerContext) -> agent_pb2.RegisterResponse:
        caller_uid = None
        if self._peers is not None:
            cred = self._peers.lookup(context.peer())
            caller_uid = cred.uid if cred is not None else None
        try:
            self._admission.check_register(
                request.pid,
                ancestry=len(request.ancestry),
                job_id=request.job_id,
                text_len=len(request.cmdline),
                hostname_len=len(request.hostname),
                pid_namespace=request.pid_namespace,
                caller_uid=caller_uid,
            )
            self._admission.admit()
        except Refusal as e:
            if e.reason == RefusalReason.NOT_OWNER:
                self._refused_log.warning("owner", "agent registration refused: %s", e.message)
            elif e.reason == RefusalReason.TOO_MANY_UNWATCHED:
                self._full_log.warning("unwatched", "agent registration refused: %s", e.message)
            _abort_refused(context, e)
        session = secrets.token_hex(16)  # a secret of this registration: Watch and ReportTrace must carry it
        try:
            self._register(request, session)
        except RegistryFullError as e:
            self._full_log.warning("full", "agent registration refused: %s", e)
            abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, str(e), ErrorReason.REGISTRY_FULL)
        except JobOfAnotherUserError as e:
            self._refused_log.warning("job", "agent registration refused: %s", e)
            abort(context, grpc.StatusCode.PERMISSION_DENIED, str(e), ErrorReason.JOB_OF_ANOTHER_USER)
        self._admission.registered(session, request.pid)
        return agent_pb2.RegisterResponse(
            session_id=session, keepalive_ms=self._keepalive_ms, daemon_version=dyno.__version__
        )

    def _register(self, request: agent_pb2.RegisterRequest, session: str) -> None:
        self._registry.register(
            RegisteredProcess(
                pid=request.pid,
                job_id=request.job_id,
                protocol=PROTOCOL_AGENT,
                ancestry=tuple(request.ancestry),
                rank=request.rank if request.HasField("rank") else None,
                local_rank=request.local_rank if request.HasField("local_rank") else None,
                world_size=request.world_size if request.HasField("world_size") else None,
                gpu=request.gpu,
                cmdline=request.cmdline,
                hostname=request.hostname,
                session_id=session,
                reports_with_session=request.reports_with_session,
            )
        )

    async def Watch(
        self, request: agent_pb2.WatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[agent_pb2.AgentCommand]:
        """On the agent server's event loop: the stream waits on its queue (which the trace manager fills from other
        threads) without a thread; a client that goes away cancels it (the finally below runs)."""
        pid, session = request.pid, request.session_id
        rec = self._registry.get(pid)
        if rec is None or rec.session_id != session or not session:
            message = f"pid {pid} is not registered with this session: Register first"
            trailer = reason_trailer(grpc.StatusCode.NOT_FOUND, message, ErrorReason.NOT_REGISTERED)
            await context.abort(grpc.StatusCode.NOT_FOUND, message, trailing_metadata=(trailer,))
        q: WakingQueue[AgentCommand | None] = WakingQueue(asyncio.get_running_loop())
        self._tm.agent_attach(pid, session, q)
        self._registry.set_connected(pid, session, True)
        self._admission.watched(session)
        with self._lock:
            self._queues.add(q)
        if self._stopping.is_set():  # shutdown() ran before this queue was there to hear it
            q.put(None)
        try:
            yield agent_pb2.AgentCommand(keepalive=True)  # tells the agent the stream is up
            while not self._stopping.is_set():
                cmd = await next_item(q, self._keepalive_s)
                if cmd is TIMED_OUT:
                    # Its registration gone (dropped as exited, or the pid registered again): the stream is an
                    # orphan, kept open only by a connection that outlived the trainer (a fork child holding it)
                    rec = self._registry.get(pid)
                    if rec is None or rec.session_id != session:
                        break
                    self._registry.touch(pid)
                    yield agent_pb2.AgentCommand(keepalive=True)
                    continue
                if cmd is None:
                    break
                if isinstance(cmd, AgentTraceCommand):
                    msg = agent_pb2.AgentCommand(
                        trace=pc.trace_config_pb(cmd.trace_id, cmd.spec, str(cmd.output_path), cmd.deadline_ms)
                    )
                    # Delivered = handed to the stream; if the send fails the stream ends and the trace fails.
                    self._tm.agent_delivered(pid, cmd.trace_id)
                    yield msg
                elif isinstance(cmd, AgentCancelCommand):
                    yield agent_pb2.AgentCommand(cancel_trace_id=cmd.trace_id)
        finally:
            with self._lock:
                self._queues.discard(q)
            self._tm.agent_detach(pid, session)
            if not self._stopping.is_set():
                self._registry.remove(pid, GONE_REASON, session_id=session)

    def ReportTrace(
        self, request: agent_pb2.ReportTraceRequest, context: grpc.ServicerContext
    ) -> agent_pb2.ReportTraceResponse:
        state = pc.STATE_FROM_PB.get(request.state)
        # DELIVERED and RUNNING may carry a waiting note (why an iteration trace has not finished yet)
        if state is None or state not in (TraceState.DELIVERED, TraceState.RUNNING, TraceState.DONE, TraceState.FAILED):
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, "state: must be DELIVERED, RUNNING, DONE or FAILED")
        try:
            self._admission.check_report(request.pid, request.session_id)
        except Refusal as e:
            self._refused_log.warning(
                "report",
                "agent ReportTrace refused: pid %d, trace %r: %s",
                request.pid,
                request.trace_id[:64],
                e.message,
            )
            _abort_refused(context, e)
        try:
            self._tm.agent_report(request.pid, request.trace_id, state, request.error[:MAX_TEXT], path=request.path)
        except UnknownTraceError as e:
            abort(context, grpc.StatusCode.NOT_FOUND, str(e))
        except TraceRequestError as e:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(e))
        self._registry.touch(request.pid)
        return agent_pb2.ReportTraceResponse()


_STATUS_OF = {
    RefusalKind.INVALID: grpc.StatusCode.INVALID_ARGUMENT,
    RefusalKind.PRECONDITION: grpc.StatusCode.FAILED_PRECONDITION,
    RefusalKind.NOT_PERMITTED: grpc.StatusCode.PERMISSION_DENIED,
    RefusalKind.FULL: grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def _abort_refused(context: grpc.ServicerContext, e: Refusal) -> NoReturn:
    abort(context, _STATUS_OF[e.kind], e.message, ErrorReason(e.reason.value))

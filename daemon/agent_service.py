"""The Agent gRPC service (Register, Watch, ReportTrace), served only on a local Unix domain socket.

An open Watch stream is the agent's liveness signal: when it ends, the process is gone for us (a running trace
fails with "process exited or disconnected mid-trace"); the agent reconnects and registers again by itself.

Served by grpc.aio on an event loop of its own thread (dyno.daemon.aio_serving): every registered trainer holds a
Watch stream for its whole life, and on grpc's sync server each held a thread (264 of them refused every further
registration). Register and ReportTrace are fast plain functions run on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import queue
import secrets
import shutil
import socket
import stat
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc

import dyno
from dyno.daemon import proto_convert as pc
from dyno.daemon.aio_serving import TIMED_OUT, LoopThread, WakingQueue, next_item, refusing
from dyno.daemon.bindcheck import unix_bind_error
from dyno.daemon.connection_limits import agent_server_options
from dyno.daemon.peer_identity import PeerTable
from dyno.daemon.registry import (
    MAX_PROCESSES,
    PROTOCOL_AGENT,
    ProcessRecord,
    ProcessRegistry,
    RegistryFullError,
    pid_uid,
)
from dyno.daemon.request_decoding import AioRequestDecoding
from dyno.daemon.rpc_abort import abort
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
from dyno.daemon.trusted_dirs import dir_problem
from dyno.daemon.unix_front import MAX_FRONT_CONNECTIONS, MAX_FRONT_CONNECTIONS_PER_UID, UnixFront
from dyno.logthrottle import ThrottledLog
from dyno.request_limits import JOB_ID_RULE, job_id_ok
from dyno.v1 import agent_pb2, agent_pb2_grpc

__all__ = ["AgentServicer", "AgentServer", "SocketInUseError", "GONE_REASON", "MAX_UNWATCHED", "UNWATCHED_GRACE_S"]

log = logging.getLogger(__name__)

_MAX_TEXT = 4096
_MAX_ANCESTRY = 64
# Registrations waiting for their Watch stream, at most (see AgentServicer._admit). An agent opens its stream
# milliseconds after Register; one that has not within the grace period makes room for a new one.
MAX_UNWATCHED = 256
UNWATCHED_GRACE_S = 10.0
_PF_KTHREAD = 0x00200000  # /proc/<pid>/stat flags: a kernel thread


# The agent front's buffer each way per connection: agents' messages are small (a trace command, a report), and there
# may be thousands of connections (one per registered agent)
_AGENT_FRONT_BUFFER = 64 * 1024

MAX_UNIX_SOCKET_PATH = 107  # sockaddr_un.sun_path holds 108 bytes, the terminating NUL included


def _own_pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def _not_a_process(pid: int) -> str | None:
    """Why `pid` names nothing that could run an agent, or None (also when /proc cannot tell: it exited, which the
    liveness check reports). A thread's id answers kill(2) and has its /proc entry like a process's, so every thread
    on the host was a pid anyone could register (enough, on a busy host, to fill the registry's caps); a kernel
    thread runs no Python."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            tgid = next((int(line.split()[1]) for line in f if line.startswith(b"Tgid:")), pid)
        with open(f"/proc/{pid}/stat", "rb") as f:
            flags = int(f.read().rsplit(b")", 1)[1].split()[6])
    except (OSError, ValueError, IndexError):
        return None
    if tgid != pid:
        return f"pid: {pid} is a thread of process {tgid}, not a process: register the process's pid"
    if flags & _PF_KTHREAD:
        return f"pid: {pid} is a kernel thread"
    return None


class SocketInUseError(OSError):
    """Another live daemon serves this agent socket."""


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
        self._pid_namespace = _own_pid_namespace()
        self._unwatched: dict[str, tuple[int, float]] = {}  # session -> (pid, when registered), oldest first

    def shutdown(self) -> None:
        """Ends every Watch stream promptly (server stop)."""
        self._stopping.set()
        with self._lock:
            for q in self._queues:
                q.put(None)

    def Register(self, request: agent_pb2.RegisterRequest, context: grpc.ServicerContext) -> agent_pb2.RegisterResponse:
        if request.pid <= 0:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, "pid: required (> 0)")
        if len(request.ancestry) > _MAX_ANCESTRY:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"ancestry: at most {_MAX_ANCESTRY} pids")
        if not job_id_ok(request.job_id):  # StartTrace names no other: such a process could never be traced
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"job_id: {JOB_ID_RULE}")
        if len(request.cmdline) > _MAX_TEXT or len(request.hostname) > 256:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, "cmdline/hostname: too long")
        # A trainer in a container with its own pid namespace (the agent socket mounted into it) sends pids of
        # that namespace: its pid 1 is the host's init here, and two such jobs took each other's registration.
        theirs = request.pid_namespace
        if theirs and self._pid_namespace and theirs[:32] != self._pid_namespace:
            abort(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                f"pid: process {request.pid} runs in another pid namespace than this daemon (a container?), where its "
                "pid names another process: it cannot register here; run the trainer in the daemon's pid namespace "
                "(e.g. docker run --pid=host) or a daemon in the trainer's",
            )
        # Any local user may call (0666): a pid that names no process here (made up, exited, or of another pid
        # namespace such as a container's) would only fill the registry until garbage collection.
        if not self._registry.is_alive(request.pid):
            abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"pid: no process {request.pid} on this host (a trainer in another pid namespace, e.g. a container, "
                "cannot register with the host's daemon)",
            )
        problem = _not_a_process(request.pid)
        if problem is not None:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, problem)
        refusal = self._not_owner(request.pid, context)
        if refusal is not None:
            self._refused_log.warning("owner", "agent registration refused: %s", refusal)
            abort(context, grpc.StatusCode.PERMISSION_DENIED, refusal)
        # Nor may it take over a live registration: grpc tells a servicer nothing of who calls (no SO_PEERCRED), so
        # any local user could otherwise register another user's trainer by its pid, receive its trace requests on
        # their own Watch stream, and leave it untraced. The trainer's own agent registers again only after its
        # stream ended (reconnecting), when the entry is gone or no longer connected.
        current = self._registry.get(request.pid)
        if current is not None and current.protocol == PROTOCOL_AGENT and current.connected:
            abort(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                f"pid: process {request.pid} is registered by a connected dyno agent (its Watch stream is open); a "
                "second registration would take its trace requests: register once that stream has ended",
            )
        self._admit(context)
        session = secrets.token_hex(16)  # a secret of this registration: Watch and ReportTrace must carry it
        try:
            self._register(request, session)
        except RegistryFullError as e:
            self._full_log.warning("full", "agent registration refused: %s", e)
            abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
        with self._lock:
            self._unwatched[session] = (request.pid, time.monotonic())
        return agent_pb2.RegisterResponse(
            session_id=session, keepalive_ms=self._keepalive_ms, daemon_version=dyno.__version__
        )

    def _not_owner(self, pid: int, context: grpc.ServicerContext) -> str | None:
        """Why the caller may not register `pid` (None: it may): only the process's own user (the owner of
        /proc/<pid>) or root registers it, else another user could take its trace requests on their own Watch
        stream and make it join any job. The caller's uid is the kernel's (SO_PEERCRED, through the UnixFront)."""
        if self._peers is None:
            return None
        cred = self._peers.lookup(context.peer())
        if cred is None:
            return "cannot tell which user calls (not through dynod's agent socket): registration refused"
        owner = pid_uid(pid)
        if cred.uid in (0, owner):
            return None
        return (
            f"pid: process {pid} runs as uid {owner}, and uid {cred.uid} may register only its own processes "
            "(the trainer's agent registers itself)"
        )

    def _admit(self, context: grpc.ServicerContext) -> None:
        """Refuse a registration (RESOURCE_EXHAUSTED) while MAX_UNWATCHED others wait for their Watch stream, after
        dropping those that waited past UNWATCHED_GRACE_S. **Why:** a registration without its stream stays until
        garbage collection (30 s) and anyone may register any live process, so re-registering others' processes in a
        loop filled the registry's caps for every trainer, libkineto's included. Streams are bounded by the agent
        server's threads; registrations without one now are too."""
        now = time.monotonic()
        with self._lock:
            stale = [(s, pid) for s, (pid, t) in self._unwatched.items() if now - t >= UNWATCHED_GRACE_S]
            for s, _ in stale:
                del self._unwatched[s]
            waiting = len(self._unwatched)
        for s, pid in stale:
            rec = self._registry.get(pid)
            if rec is not None and rec.session_id == s and not rec.connected:
                self._registry.remove(pid, "registered but never opened its Watch stream", session_id=s)
        if waiting >= MAX_UNWATCHED:
            message = (
                f"{waiting} agent registrations are waiting for their Watch stream (this daemon's limit); retry shortly"
            )
            self._full_log.warning("unwatched", "agent registration refused: %s", message)
            abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, message)

    def _register(self, request: agent_pb2.RegisterRequest, session: str) -> None:
        self._registry.register(
            ProcessRecord(
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
            await context.abort(
                grpc.StatusCode.NOT_FOUND, f"pid {pid} is not registered with this session: Register first"
            )
        q: WakingQueue[AgentCommand | None] = WakingQueue(asyncio.get_running_loop())
        self._tm.agent_attach(pid, session, q)
        self._registry.set_connected(pid, session, True)
        with self._lock:
            self._unwatched.pop(session, None)
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
        refusal = self._report_refusal(request)
        if refusal is not None:
            self._refused_log.warning(
                "report", "agent ReportTrace refused: pid %d, trace %r: %s", request.pid, request.trace_id[:64], refusal
            )
            abort(context, grpc.StatusCode.PERMISSION_DENIED, refusal)
        try:
            self._tm.agent_report(request.pid, request.trace_id, state, request.error[:_MAX_TEXT], path=request.path)
        except UnknownTraceError as e:
            abort(context, grpc.StatusCode.NOT_FOUND, str(e))
        except TraceRequestError as e:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(e))
        self._registry.touch(request.pid)
        return agent_pb2.ReportTraceResponse()

    def _report_refusal(self, request: agent_pb2.ReportTraceRequest) -> str | None:
        """Why a report may not be believed (None: it may). **Why:** the socket is 0666 and grpc tells a servicer
        nothing of its caller, so any local user who knew a trace id and pid (ListProcesses and GetTrace list both)
        could mark another user's part FAILED. A report must carry the session that pid's Register answered, which
        only its agent holds. An agent from before sessions (it did not say reports_with_session) sends none: its
        reports are believed without one, as before; a libkineto process never reports here."""
        rec = self._registry.get(request.pid)
        if rec is None or rec.protocol != PROTOCOL_AGENT:
            return f"pid {request.pid} is not registered by a dyno agent: Register first, then report with its session"
        if request.session_id:
            same = secrets.compare_digest(request.session_id.encode(), rec.session_id.encode())
            return None if same else f"session_id: not pid {request.pid}'s registration (it registered again?)"
        if rec.reports_with_session:
            return f"session_id: required (pid {request.pid}'s agent registered with reports_with_session)"
        return None


def prepare_socket_path(path: Path) -> None:
    """Create the parent dir; remove a stale socket file; refuse when another daemon answers on it.

    Raises OSError whose message names the path (gRPC's own bind failure says neither the path nor why)."""
    if len(os.fsencode(path)) > MAX_UNIX_SOCKET_PATH:
        raise OSError(
            errno.ENAMETOOLONG,
            f"agent socket path {path} is too long for a Unix socket (> {MAX_UNIX_SOCKET_PATH} bytes)",
        )
    # Whoever could rename entries in its folder could put a socket of their own in its place: trainers would take
    # their trace requests, output paths included (where the agent writes, as the trainer's user), from them.
    problem = dir_problem(path.parent, what="the agent socket's folder", key="agent_socket", shared=True)
    if problem is not None:
        raise OSError(errno.EPERM, problem)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    except OSError as e:
        why = "it exists and is not a directory" if e.errno == errno.EEXIST else e.strerror
        raise OSError(e.errno, f"cannot create the agent socket's directory {path.parent}: {why}") from None
    try:
        st = path.lstat()
    except FileNotFoundError:
        _probe_bind(path)
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise OSError(17, f"agent socket path {path} exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
    except OSError:
        path.unlink(missing_ok=True)  # nobody listens: stale from a crashed daemon
        _probe_bind(path)
        return
    finally:
        probe.close()
    raise SocketInUseError(98, f"agent socket {path} is in use by another live daemon")


def _probe_bind(path: Path) -> None:
    # gRPC's bind failure printed its own C++ log line before dynod's, and gave no reason
    err = unix_bind_error(path)
    if err is not None:
        raise OSError(err.errno, f"cannot bind the agent socket {path}: {err.strerror}")


class AgentServer:
    """A grpc.aio server of its own on `unix:<path>`, on an event loop in a thread of its own (aio_serving.py): a
    Watch stream is a task, not a thread. At most `max_streams` RPCs at once (streams cost memory: the registry's
    default cap); past it a call is refused with RESOURCE_EXHAUSTED."""

    def __init__(
        self,
        servicer: AgentServicer,
        path: Path,
        *,
        max_streams: int = MAX_PROCESSES,
        mode: int = 0o666,
        peers: PeerTable | None = None,
        max_connections: int = MAX_FRONT_CONNECTIONS,
        max_connections_per_uid: int = MAX_FRONT_CONNECTIONS_PER_UID,
    ) -> None:
        self._servicer = servicer
        self._front_limits = (max_connections, max_connections_per_uid)
        self._path = path
        self._max_streams = max_streams
        self._mode = mode
        self._loop_thread: LoopThread | None = None
        self._grace_s = 1.0
        # with `peers`: grpc listens on a private socket (a 0700 folder of ours) and a UnixFront serves `path`,
        # recording each caller's credentials (dyno.daemon.unix_front)
        self._peers = peers
        self._front: UnixFront | None = None
        self._private: Path | None = None

    @property
    def path(self) -> Path:
        return self._path

    def start(self) -> None:
        prepare_socket_path(self._path)
        if self._peers is not None:
            self._private = Path(tempfile.mkdtemp(prefix="dynod-agent-"))
        bound = self._path if self._private is None else self._private / "agent.sock"
        loop_thread = LoopThread("agent-aio")
        try:
            loop_thread.start(lambda ready, stop: self._serve(bound, ready, stop))
        except OSError:
            if self._private is not None:
                shutil.rmtree(self._private, ignore_errors=True)
                self._private = None
            raise
        self._loop_thread = loop_thread
        # Trainers of every local user must reach it (as with the kineto endpoint, an abstract socket nobody can
        # restrict): a root daemon with 0660 would silently refuse every non-root trainer. Never exposed on TCP.
        if self._peers is not None:
            most, per_uid = self._front_limits
            self._front = UnixFront(
                self._path,
                bound,
                self._peers,
                mode=self._mode,
                max_connections=most,
                max_per_uid=per_uid,
                buffer_bytes=_AGENT_FRONT_BUFFER,
            )
            try:
                self._front.start()
            except OSError as e:
                self._front = None
                raise OSError(e.errno, f"cannot bind the agent socket {self._path}: {e.strerror}") from None
        else:
            os.chmod(self._path, self._mode)
        log.info("agent service listening on unix:%s", self._path)

    async def _serve(self, bound: Path, ready: Callable[[], None], stop: asyncio.Event) -> None:
        server = grpc.aio.server(
            maximum_concurrent_rpcs=self._max_streams + 8,
            options=agent_server_options(),  # connections, streams per connection, idle (connection_limits.py)
            interceptors=[AioRequestDecoding()],  # request bodies decoded in the handlers (request_decoding.py)
        )
        agent_pb2_grpc.add_AgentServicer_to_server(_AioAgent(self._servicer), server)
        try:
            server.add_insecure_port(f"unix:{bound}")
        except RuntimeError:  # grpc's "Failed to bind to address": the usual cause is the directory's permissions
            raise OSError(
                errno.EACCES, f"cannot bind the agent socket {self._path} (is its directory writable?)"
            ) from None
        await server.start()
        ready()
        await stop.wait()
        await server.stop(self._grace_s)

    def stop(self, grace_s: float = 1.0) -> None:
        self._servicer.shutdown()
        if self._loop_thread is not None:
            self._grace_s = grace_s
            self._loop_thread.stop(grace_s + 1)
            self._loop_thread = None
            if self._peers is None:  # grpc's own socket file; never started, it would be someone else's
                with contextlib.suppress(OSError):
                    self._path.unlink()
        if self._front is not None:
            self._front.stop()  # removes its socket file
            self._front = None
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)
            self._private = None


class _AioAgent(agent_pb2_grpc.AgentServicer):
    """AgentServicer's methods as the aio server calls them: Register and ReportTrace (fast, plain) on the loop."""

    def __init__(self, servicer: AgentServicer) -> None:
        self._servicer = servicer

    async def Register(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await refusing(self._servicer.Register, request, context)

    async def Watch(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async for command in self._servicer.Watch(request, context):
            yield command

    async def ReportTrace(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await refusing(self._servicer.ReportTrace, request, context)

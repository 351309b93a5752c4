"""The agent service's socket and server: the socket path's checks (a live daemon on it, a stale file, its folder's
trust), and a grpc.aio server on an event loop of its own thread, behind a UnixFront that records each caller's
credentials when per-user rules apply.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc

from dyno.daemon.agent_service import AgentServicer
from dyno.daemon.aio_serving import LoopThread, refusing
from dyno.daemon.bindcheck import prepare_public_socket
from dyno.daemon.connection_limits import agent_server_options
from dyno.daemon.peer_identity import PeerTable
from dyno.daemon.registry import MAX_PROCESSES
from dyno.daemon.request_decoding import AioRequestDecoding
from dyno.daemon.unix_front import MAX_FRONT_CONNECTIONS, MAX_FRONT_CONNECTIONS_PER_UID, UnixFront
from dyno.v1 import agent_pb2_grpc

__all__ = ["AgentServer"]

log = logging.getLogger("dyno.daemon.agent_service")  # the agent service's log lines, one logger

# The agent front's buffer each way per connection: agents' messages are small (a trace command, a report), and there
# may be thousands of connections (one per registered agent)
_AGENT_FRONT_BUFFER = 64 * 1024


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
        prepare_public_socket(self._path, what="agent socket", key="agent_socket")
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

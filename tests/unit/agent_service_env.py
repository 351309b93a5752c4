"""A real agent service for the tests of the agent RPCs: AgentServicer over a TraceManager, served on a Unix socket
in a short temp dir (socket paths are limited to ~107 bytes), with a channel and stub to it."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc

from dyno.daemon.agent_server import AgentServer
from dyno.daemon.agent_service import AgentServicer
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.manager import TraceManager
from dyno.v1 import agent_pb2_grpc

from conftest import short_tmpdir

__all__ = ["AgentService", "agent_service"]


@dataclass(frozen=True)
class AgentService:
    manager: TraceManager
    registry: ProcessRegistry
    server: AgentServer
    channel: grpc.Channel
    stub: agent_pb2_grpc.AgentStub


@contextlib.contextmanager
def agent_service(registry: ProcessRegistry, prefix: str, hostname: str, **servicer: Any) -> Iterator[AgentService]:
    """The service over `registry` (its trace dir and socket under a temp dir named `prefix`...), `servicer` passed
    to AgentServicer (keepalive_ms=...); stopped, and its folder removed, after."""
    d = short_tmpdir(prefix)
    manager = TraceManager(registry, d / "traces", hostname)
    server = AgentServer(AgentServicer(manager, registry, **servicer), d / "agent.sock")
    server.start()
    channel = grpc.insecure_channel(f"unix:{server.path}")
    try:
        yield AgentService(manager, registry, server, channel, agent_pb2_grpc.AgentStub(channel))
    finally:
        channel.close()
        server.stop(0)
        shutil.rmtree(d, ignore_errors=True)

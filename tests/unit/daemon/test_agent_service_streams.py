"""The agent socket holds a Watch stream per registered trainer without a thread per stream (grpc.aio on an event loop
of its own: dyno.daemon.aio_serving): more streams than the 264 threads of the sync server it had, all up at once,
trace requests delivered on them, and nothing left behind once they end."""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest

from dyno.daemon.agent_server import AgentServer
from dyno.daemon.agent_service import AgentServicer
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import TraceSpec
from dyno.v1 import agent_pb2, agent_pb2_grpc

from conftest import short_tmpdir, wait_for

pytestmark = pytest.mark.unit

STREAMS = 300
CHANNELS = 10  # a connection carries at most 64 streams (connection_limits.MAX_CONCURRENT_STREAMS)
FIRST_PID = 3_000_000  # above pid_max: no process of this host has it (liveness is the fake below)


@dataclass
class Env:
    server: AgentServer
    registry: ProcessRegistry
    manager: TraceManager


@pytest.fixture
def env() -> Iterator[Env]:
    d = short_tmpdir("dyno-streams-")
    reg = ProcessRegistry(is_alive=lambda pid: pid >= FIRST_PID, uid_of=lambda pid: 1000, max_per_uid=4096)
    manager = TraceManager(reg, d / "traces", "hostS")
    server = AgentServer(AgentServicer(manager, reg), d / "agent.sock")
    server.start()
    try:
        yield Env(server, reg, manager)
    finally:
        server.stop(0)
        shutil.rmtree(d, ignore_errors=True)


async def _hold_streams(env: Env, up: threading.Event, release: threading.Event) -> list[agent_pb2.AgentCommand]:
    """Register STREAMS pids, open their Watch streams and read the first message of each; set `up`, wait for
    `release`, and return each stream's next message (the trace request)."""
    options = [("grpc.use_local_subchannel_pool", 1)]
    channels = [grpc.aio.insecure_channel(f"unix:{env.server.path}", options=options) for _ in range(CHANNELS)]
    try:

        async def one(i: int) -> grpc.aio.UnaryStreamCall:
            stub = agent_pb2_grpc.AgentStub(channels[i % CHANNELS])
            pid = FIRST_PID + i
            reg = await stub.Register(agent_pb2.RegisterRequest(pid=pid, job_id="many"), timeout=30)
            call = stub.Watch(agent_pb2.WatchRequest(pid=pid, session_id=reg.session_id))
            first = await call.read()
            assert first.keepalive
            return call

        calls = await asyncio.gather(*(one(i) for i in range(STREAMS)))
        up.set()
        await asyncio.get_running_loop().run_in_executor(None, release.wait, 30)
        nexts = await asyncio.gather(*(asyncio.wait_for(c.read(), 30) for c in calls))
        for c in calls:
            c.cancel()
        return list(nexts)
    finally:
        for ch in channels:
            await ch.close()


def test_hundreds_of_watch_streams_are_held_without_a_thread_each(env: Env) -> None:
    threads_before = threading.active_count()
    up, release = threading.Event(), threading.Event()
    result: list[list[agent_pb2.AgentCommand]] = []
    holder = threading.Thread(target=lambda: result.append(asyncio.run(_hold_streams(env, up, release))))
    holder.start()
    try:
        while holder.is_alive() and not up.wait(0.2):  # a refused stream ends the holder (its error is printed)
            pass
        assert up.is_set(), "the streams did not all come up"
        connected = [p for p in env.registry.list() if p.connected]
        assert len(connected) == STREAMS
        # the server's threads: a stream costs none (the client's asyncio loop and executor add a few)
        assert threading.active_count() - threads_before < 20
        started = env.manager.start(TraceSpec(job_id="many", duration_ms=1000))
        assert len(started.triggered) == STREAMS
    finally:
        release.set()
        holder.join(60)
    (commands,) = result
    assert {c.trace.trace_id for c in commands} == {started.trace_id}
    wait_for(lambda: len(env.registry) == 0, timeout_s=30)  # each ended stream ends its registration


def test_a_watch_for_an_unknown_session_is_refused(env: Env) -> None:
    with grpc.insecure_channel(f"unix:{env.server.path}") as channel:
        stream = agent_pb2_grpc.AgentStub(channel).Watch(agent_pb2.WatchRequest(pid=FIRST_PID, session_id="x"))
        with pytest.raises(grpc.RpcError) as refused:
            next(stream)
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND

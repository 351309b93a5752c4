"""An agent's Watch stream ends once its registration is gone. It went on for as long as the connection stayed open:
a trainer that exited while a child it forked still held its Unix socket connection (the agent runs grpc without
fork handlers, so fork children inherit it) left a stream that garbage collection had dropped from the registry,
holding one of the Agent server's threads for as long as the child lived; 264 of them refused every registration
(bench/daemon_soak.py, the "orphan" ending)."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest

from dyno.daemon.agent_service import AgentServer, AgentServicer
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.trace_manager import TraceManager
from dyno.v1 import agent_pb2, agent_pb2_grpc

from conftest import short_tmpdir

pytestmark = pytest.mark.unit

PID = 4242


@dataclass
class Env:
    stub: agent_pb2_grpc.AgentStub
    registry: ProcessRegistry
    alive: set[int]


@pytest.fixture
def env() -> Iterator[Env]:
    d = short_tmpdir("dyno-orph-")
    alive = {PID}
    reg = ProcessRegistry(is_alive=lambda pid: pid in alive, uid_of=lambda pid: 1000)
    manager = TraceManager(reg, d / "traces", "hostO")
    server = AgentServer(AgentServicer(manager, reg, keepalive_ms=100), d / "agent.sock")
    server.start()
    channel = grpc.insecure_channel(f"unix:{server.path}")
    try:
        yield Env(agent_pb2_grpc.AgentStub(channel), reg, alive)
    finally:
        channel.close()
        server.stop(0)
        shutil.rmtree(d, ignore_errors=True)


def _watch(env: Env, job: str = "J") -> tuple[str, threading.Event, list[BaseException]]:
    """Register PID and hold its Watch stream (read on a thread, as the agent does); -> (session, ended, errors)."""
    session = env.stub.Register(agent_pb2.RegisterRequest(pid=PID, job_id=job, gpu=-1), timeout=5).session_id
    stream = env.stub.Watch(agent_pb2.WatchRequest(pid=PID, session_id=session), timeout=6)
    next(stream)  # up
    ended = threading.Event()
    errors: list[BaseException] = []

    def read() -> None:
        try:
            for _ in stream:
                pass
        except grpc.RpcError as e:  # DEADLINE_EXCEEDED: it never ended by itself
            errors.append(e)
        ended.set()

    threading.Thread(target=read, daemon=True).start()
    return session, ended, errors


def test_a_stream_whose_process_was_dropped_as_exited_ends(env: Env) -> None:
    _session, ended, errors = _watch(env)
    time.sleep(0.3)
    assert not ended.is_set()  # keepalives while it is registered
    env.alive.discard(PID)  # the trainer exited; its connection stays open (a forked child holds it)
    dropped = env.registry.collect_garbage()
    assert [r.pid for r, _ in dropped] == [PID]
    assert ended.wait(8)
    assert errors == [], "the stream ran until its deadline instead of ending with the registration"


def test_a_stream_whose_pid_registered_again_ends_and_the_new_registration_stays(env: Env) -> None:
    old, ended, errors = _watch(env)
    new = env.stub.Register(agent_pb2.RegisterRequest(pid=PID, job_id="K", gpu=-1), timeout=5).session_id
    assert ended.wait(8)
    assert errors == []
    rec = env.registry.get(PID)
    assert rec is not None and rec.session_id == new != old and rec.job_id == "K"

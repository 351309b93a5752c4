"""An agent's Watch stream ends once its registration is gone, also while the connection stays open: a trainer that
exited while a child it forked still holds its Unix socket connection (the agent runs grpc without fork handlers,
so fork children inherit it) must not keep a stream, and one of the Agent server's threads, for the child's life
(bench/daemon_soak.py, the "orphan" ending)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest
from agent_service_env import agent_service

from dyno.daemon import connection_limits
from dyno.daemon.agent_server import AgentServer
from dyno.daemon.agent_service import AgentServicer
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.manager import TraceManager
from dyno.v1 import agent_pb2, agent_pb2_grpc

from conftest import short_tmpdir, wait_for

pytestmark = pytest.mark.unit

PID = 4242


@dataclass
class Env:
    stub: agent_pb2_grpc.AgentStub
    registry: ProcessRegistry
    alive: set[int]


@pytest.fixture
def env() -> Iterator[Env]:
    alive = {PID}
    reg = ProcessRegistry(is_alive=lambda pid: pid in alive, uid_of=lambda pid: 1000)
    with agent_service(reg, "dyno-orph-", "hostO", keepalive_ms=100) as s:
        yield Env(s.stub, reg, alive)


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
    # The Register RPC refuses a pid whose Watch stream is open (test_agent_service_security.py); the registry's record
    # can still be replaced under it (pid reuse seen by the registry first, a libkineto registration of the pid)
    new = "new-session"
    env.registry.register(RegisteredProcess(pid=PID, job_id="K", protocol=PROTOCOL_AGENT, session_id=new))
    assert ended.wait(8)
    assert errors == []
    rec = env.registry.get(PID)
    assert rec is not None and rec.session_id == new != old and rec.job_id == "K"


_TRAINER = """
import os, sys, time
os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"  # as the agent runs grpc: a fork child inherits its connection
import grpc
from dyno.v1 import agent_pb2, agent_pb2_grpc
stub = agent_pb2_grpc.AgentStub(grpc.insecure_channel("unix:" + sys.argv[1]))
session = stub.Register(agent_pb2.RegisterRequest(pid=os.getpid(), job_id="J", gpu=-1), timeout=5).session_id
watch = stub.Watch(agent_pb2.WatchRequest(pid=os.getpid(), session_id=session))
next(watch)
child = os.fork()
if child == 0:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # not the test's pipes
    os.dup2(devnull, 2)
    time.sleep(30)  # the child lives on, holding the connection
    os._exit(0)
print(child, flush=True)
os._exit(0)  # the trainer exits
"""


def _open_sockets() -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass  # closed meanwhile
    return n


def test_the_connection_a_fork_child_keeps_open_is_closed_once_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole story with a real exited trainer: its registration is dropped, its stream ends, and the idle limit
    closes the connection its child still holds."""
    monkeypatch.setattr(connection_limits, "MAX_CONNECTION_IDLE_MS", 500)
    d = short_tmpdir("dyno-orph-")
    reg = ProcessRegistry()
    server = AgentServer(AgentServicer(TraceManager(reg, d / "traces", "hostO"), reg, keepalive_ms=100), d / "a.sock")
    server.start()
    child: int | None = None  # a pidfd of the fork child: no child of ours, its pid may name another process later
    try:
        before = _open_sockets()
        out = subprocess.run([sys.executable, "-c", _TRAINER, str(server.path)], capture_output=True, timeout=30)
        assert out.returncode == 0, out.stderr.decode()[-2000:]
        child = os.pidfd_open(int(out.stdout))  # it sleeps 30 s: alive here
        assert _open_sockets() == before + 1  # the child's connection
        wait_for(lambda: (reg.collect_garbage(), len(reg) == 0)[1], 10, 0.1)  # the trainer exited
        wait_for(lambda: _open_sockets() == before, 8, 0.1)  # the orphaned connection is closed
    finally:
        if child is not None:
            try:
                signal.pidfd_send_signal(child, signal.SIGKILL)
            except ProcessLookupError:
                pass  # it has ended on its own
            os.close(child)
        server.stop(0)
        shutil.rmtree(d, ignore_errors=True)

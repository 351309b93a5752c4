"""The tracing RPCs and the Agent service in-process: a real gRPC server on loopback and on a Unix socket."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from dyno.client.client import DynoClient
from dyno.client.errors import InvalidArgument, NotFound
from dyno.daemon.bindcheck import SocketInUseError, prepare_public_socket
from dyno.daemon.config import DaemonConfig
from dyno.daemon.history import History
from dyno.daemon.server import DynoServicer, add_to_server
from dyno.daemon.tracing.subsystem import Tracing
from dyno.filechunks import checksum_of, new_digest
from dyno.v1 import agent_pb2, agent_pb2_grpc, dyno_pb2

from conftest import short_tmpdir, wait_for

pytestmark = pytest.mark.unit


@dataclass
class Env:
    tracing: Tracing
    client: DynoClient
    agent: agent_pb2_grpc.AgentStub
    socket_path: Path


@pytest.fixture
def env() -> Iterator[Env]:
    d = short_tmpdir("dyno-rpc-")
    cfg = DaemonConfig(
        trace_dir=d / "traces", agent_socket=d / "run" / "agent.sock", kineto_endpoint="off", state_dir=d / "state"
    )
    tracing = Tracing(cfg, "hostU", housekeeping_s=0.05)
    tracing.start()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    add_to_server(DynoServicer(lambda: dyno_pb2.Status(), History(2), "hostU", trace_rpcs=tracing.rpcs), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"unix:{cfg.agent_socket_path}")
    client = DynoClient(f"127.0.0.1:{port}", timeout_s=5)
    try:
        yield Env(tracing, client, agent_pb2_grpc.AgentStub(channel), cfg.agent_socket_path)
    finally:
        client.close()
        channel.close()
        server.stop(0)
        tracing.stop()
        shutil.rmtree(d, ignore_errors=True)


class Watcher:
    """An agent's Watch stream consumed on a thread."""

    def __init__(self, stub: agent_pb2_grpc.AgentStub, pid: int, session: str) -> None:
        self.call = stub.Watch(agent_pb2.WatchRequest(pid=pid, session_id=session))
        self.commands: list[agent_pb2.AgentCommand] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for cmd in self.call:
                self.commands.append(cmd)
        except grpc.RpcError:
            pass

    def traces(self) -> list[agent_pb2.TraceConfig]:
        return [c.trace for c in self.commands if c.WhichOneof("kind") == "trace"]


def register(env: Env, pid: int, job: str = "J", **kw) -> str:  # type: ignore[no-untyped-def]
    resp = env.agent.Register(agent_pb2.RegisterRequest(pid=pid, job_id=job, gpu=-1, **kw), timeout=5)
    return resp.session_id


def test_agent_socket_is_private_and_stale_sockets_are_handled(env: Env, tmp_path: Path) -> None:
    assert stat.S_IMODE(env.socket_path.stat().st_mode) == 0o666
    with pytest.raises(SocketInUseError):
        prepare_public_socket(env.socket_path, what="agent socket", key="agent_socket")
    stale = Path(short_tmpdir("dyno-stale-")) / "agent.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(stale))
    s.close()  # a socket file nobody listens on
    prepare_public_socket(stale, what="agent socket", key="agent_socket")
    assert not stale.exists()
    shutil.rmtree(stale.parent)


def test_agent_trace_end_to_end_with_fetch(env: Env, tmp_path: Path) -> None:
    pid = os.getpid()
    session = register(env, pid, rank=3, world_size=8, cmdline="train.py")
    w = Watcher(env.agent, pid, session)
    wait_for(lambda: w.commands)  # the first keepalive says the stream is up
    (info,) = env.client.list_processes("J").processes
    assert info.protocol == dyno_pb2.PROTOCOL_AGENT and info.rank == 3 and info.world_size == 8
    start = env.client.start_trace(dyno_pb2.TraceRequest(job_id="J", iterations=2, with_stack=True))
    (cfg,) = wait_for(w.traces)
    assert cfg.trace_id == start.trace_id and cfg.iterations == 2 and cfg.with_stack
    assert cfg.output_path == start.triggered[0].path and cfg.output_path.startswith(str(env.tracing.config.trace_dir))
    wait_for(lambda: env.client.get_trace(start.trace_id).processes[0].state == dyno_pb2.TRACE_STATE_DELIVERED)
    env.agent.ReportTrace(
        agent_pb2.ReportTraceRequest(pid=pid, trace_id=cfg.trace_id, state=dyno_pb2.TRACE_STATE_RUNNING), timeout=5
    )
    data = os.urandom(3 * 1024 * 1024 + 5)
    Path(cfg.output_path).write_bytes(data)
    env.agent.ReportTrace(
        agent_pb2.ReportTraceRequest(
            pid=pid, trace_id=cfg.trace_id, state=dyno_pb2.TRACE_STATE_DONE, path=cfg.output_path, size_bytes=len(data)
        ),
        timeout=5,
    )
    status = env.client.get_trace(start.trace_id)
    assert status.finished and status.processes[0].state == dyno_pb2.TRACE_STATE_DONE
    assert status.processes[0].size_bytes == len(data) and status.request.iterations == 2
    chunks = list(env.client.stub.FetchTraceFile(dyno_pb2.FetchTraceFileRequest(trace_id=start.trace_id, pid=pid)))
    assert len(chunks) == 4 and all(len(c.data) <= 1024 * 1024 for c in chunks)
    assert chunks[-1].last and chunks[-1].checksum == checksum_of(new_digest(data))
    assert b"".join(c.data for c in chunks) == data and chunks[0].total_size == len(data)
    got = env.client.fetch_trace_file(start.trace_id, pid, tmp_path)
    assert got.path.read_bytes() == data and got.path.name == Path(cfg.output_path).name
    assert got.checksum == chunks[-1].checksum and got.size_bytes == len(data)
    w.call.cancel()


def test_watch_end_fails_a_running_trace(env: Env) -> None:
    pid = os.getpid()
    w = Watcher(env.agent, pid, register(env, pid))
    wait_for(lambda: w.commands)
    start = env.client.start_trace(dyno_pb2.TraceRequest(job_id="J", duration_ms=60_000))
    wait_for(w.traces)
    w.call.cancel()  # the trainer goes away
    final = wait_for(lambda: (lambda s: s if s.finished else None)(env.client.get_trace(start.trace_id)))
    assert final.processes[0].state == dyno_pb2.TRACE_STATE_FAILED
    assert final.processes[0].error == "process exited or disconnected mid-trace"
    assert not env.client.list_processes().processes


def test_cancel_reaches_the_agent(env: Env) -> None:
    pid = os.getpid()
    w = Watcher(env.agent, pid, register(env, pid))
    wait_for(lambda: w.commands)
    start = env.client.start_trace(dyno_pb2.TraceRequest(job_id="J", duration_ms=60_000))
    status = env.client.cancel_trace(start.trace_id)
    assert status.processes[0].state == dyno_pb2.TRACE_STATE_CANCELLED
    wait_for(lambda: any(c.cancel_trace_id == start.trace_id for c in w.commands))
    w.call.cancel()


def test_errors_map_to_status_codes(env: Env) -> None:
    with pytest.raises(InvalidArgument, match="job_id"):
        env.client.start_trace(dyno_pb2.TraceRequest(duration_ms=5))
    with pytest.raises(InvalidArgument, match="trace_id"):
        env.client.start_trace(dyno_pb2.TraceRequest(job_id="J", duration_ms=5, trace_id="../etc"))
    with pytest.raises(NotFound):
        env.client.get_trace("nope")
    with pytest.raises(NotFound):
        env.client.cancel_trace("nope")
    with pytest.raises(NotFound):
        list(env.client.stream(env.client.stub.FetchTraceFile, dyno_pb2.FetchTraceFileRequest(trace_id="x", pid=5)))
    with pytest.raises(InvalidArgument, match="chunk_size"):
        list(
            env.client.stream(
                env.client.stub.FetchTraceFile, dyno_pb2.FetchTraceFileRequest(trace_id="x", pid=5, chunk_size=2 << 20)
            )
        )
    with pytest.raises(grpc.RpcError) as err:
        list(env.agent.Watch(agent_pb2.WatchRequest(pid=5, session_id="bogus"), timeout=5))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    resp = env.client.start_trace(dyno_pb2.TraceRequest(job_id="J", duration_ms=5))
    assert not resp.triggered and "no processes are registered" in resp.message

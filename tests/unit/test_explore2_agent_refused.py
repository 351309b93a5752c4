"""An agent whose registration the daemon refuses (a job id over 128 characters, a bad pid...) must say that the
daemon refused it and why, not "no dyno daemon at ... until it starts"."""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from dyno.client.agent import Agent
from dyno.daemon.config import DaemonConfig
from dyno.daemon.tracing.subsystem import Tracing
from dyno.v1 import agent_pb2, agent_pb2_grpc

from conftest import short_tmpdir

pytestmark = pytest.mark.unit


# What dynod answers: a field it refuses, or its registry caps (registry.RegistryFullError).
REFUSALS = {
    grpc.StatusCode.INVALID_ARGUMENT: "job_id/cmdline/hostname: too long",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "3 processes of uid 1000 are registered with this daemon, the limit per user",
}


class RefusingAgentService(agent_pb2_grpc.AgentServicer):
    def __init__(self, code: grpc.StatusCode) -> None:
        self.registers = threading.Event()
        self.code = code

    def Register(self, request, context):  # noqa: N802 - grpc method name
        self.registers.set()
        context.abort(self.code, REFUSALS[self.code])


@pytest.fixture(params=list(REFUSALS))
def refusing_socket(request: pytest.FixtureRequest) -> Iterator[tuple[Path, RefusingAgentService]]:
    sock = short_tmpdir("dyno-e2a-") / "agent.sock"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    service = RefusingAgentService(request.param)
    agent_pb2_grpc.add_AgentServicer_to_server(service, server)
    server.add_insecure_port(f"unix:{sock}")
    server.start()
    yield sock, service
    server.stop(0)
    sock.unlink(missing_ok=True)
    sock.parent.rmdir()


def test_a_refused_registration_is_reported_with_the_daemons_reason(
    refusing_socket: tuple[Path, RefusingAgentService], caplog: pytest.LogCaptureFixture
) -> None:
    sock, service = refusing_socket
    caplog.set_level(logging.WARNING, logger="dyno.client")
    agent = Agent("x" * 200, sock, min_backoff_s=5, max_backoff_s=5).start()
    try:
        assert service.registers.wait(10)
        deadline = threading.Event()
        for _ in range(100):  # the warning is logged right after the refused call returns
            if caplog.records:
                break
            deadline.wait(0.05)
    finally:
        agent.stop()
    messages = [r.getMessage() for r in caplog.records]
    assert messages, "nothing logged"
    assert f"the dyno daemon at unix:{sock} refused to register this process" in messages[0]
    assert REFUSALS[service.code] in messages[0] and "no dyno daemon" not in messages[0]
    assert not agent.registered


@pytest.mark.parametrize("job_id", ["bad\njob", "tab\there", "x" * 129])
def test_daemon_refuses_job_ids_that_no_trace_request_could_name(job_id: str) -> None:
    """StartTrace accepts only job ids of at most 128 printable characters; a process registered under another one
    could never be traced (and a newline breaks `dyno-cli ps`'s table), so Register refuses it naming the field."""
    d = short_tmpdir("dyno-e2j-")
    cfg = DaemonConfig(
        trace_dir=d / "traces", agent_socket=d / "agent.sock", kineto_endpoint="off", state_dir=d / "state"
    )
    tracing = Tracing(cfg, "hostJ")
    tracing.start()
    channel = grpc.insecure_channel(f"unix:{cfg.agent_socket_path}")
    try:
        stub = agent_pb2_grpc.AgentStub(channel)
        with pytest.raises(grpc.RpcError) as e:
            stub.Register(agent_pb2.RegisterRequest(pid=4242, job_id=job_id, gpu=-1), timeout=5)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and e.value.details().startswith("job_id: ")
        assert len(tracing.registry) == 0
    finally:
        channel.close()
        tracing.stop()
        shutil.rmtree(d, ignore_errors=True)

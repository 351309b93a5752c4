"""What the Dyno service serves to callers without the token, when dynod has one: command lines (which can carry
secrets a job passes as arguments) are hidden from them, and live metric streams (each holds one of 16 slots) are
not theirs to hold. And the start-up warning of a root dynod that has no token, where every local user reaches
127.0.0.1. A real gRPC server on 127.0.0.1:0 with dynod's interceptors, the real tracing RPCs and Agent socket."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from dyno.client.auth import ClientAuth, create_channel
from dyno.daemon.auth import HIDDEN_CMDLINE, build_server_interceptors, exposure_refusal, warn_if_exposed
from dyno.daemon.config import DaemonConfig
from dyno.daemon.history import History, Sample
from dyno.daemon.samplers.base import Reading
from dyno.daemon.server import MAX_METRIC_STREAMS, DynoServicer, add_to_server
from dyno.daemon.tracing.subsystem import Tracing
from dyno.v1 import agent_pb2, agent_pb2_grpc, dyno_pb2, dyno_pb2_grpc

from conftest import short_tmpdir, wait_for

pytestmark = pytest.mark.unit

TOKEN = "exposure-token-0123456789abcdef"
SECRET_CMDLINE = "python train.py --wandb-api-key=hunter2hunter2"


@dataclass
class Env:
    port: int
    history: History
    servicer: DynoServicer

    def stub(self, auth: ClientAuth | None) -> tuple[grpc.Channel, dyno_pb2_grpc.DynoStub]:
        channel = create_channel(f"127.0.0.1:{self.port}", auth)
        return channel, dyno_pb2_grpc.DynoStub(channel)


def _serve(token: bool) -> Iterator[Env]:
    d = short_tmpdir("dyno-secexp-")
    token_file = d / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    cfg = DaemonConfig(
        trace_dir=d / "traces",
        agent_socket=d / "run" / "agent.sock",
        kineto_endpoint="off",
        state_dir=d / "state",
        auth_token_file=token_file if token else None,
    )
    tracing = Tracing(cfg, "hostX", housekeeping_s=0.05)
    tracing.start()
    history = History(8)
    servicer = DynoServicer(lambda: dyno_pb2.Status(), history, "hostX", trace_rpcs=tracing.rpcs)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=MAX_METRIC_STREAMS + 8), interceptors=build_server_interceptors(cfg)
    )
    add_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    agent_channel = grpc.insecure_channel(f"unix:{cfg.agent_socket_path}")
    agent = agent_pb2_grpc.AgentStub(agent_channel)
    agent.Register(agent_pb2.RegisterRequest(pid=os.getpid(), job_id="J", cmdline=SECRET_CMDLINE), timeout=5)
    try:
        yield Env(port, history, servicer)
    finally:
        agent_channel.close()
        servicer.shutdown()
        server.stop(0)
        tracing.stop()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def with_token() -> Iterator[Env]:
    yield from _serve(token=True)


@pytest.fixture
def without_token() -> Iterator[Env]:
    yield from _serve(token=False)


def _cmdlines(env: Env, auth: ClientAuth | None) -> list[str]:
    channel, stub = env.stub(auth)
    with channel:
        answer = stub.ListProcesses(dyno_pb2.ListProcessesRequest(), timeout=5)
    return [p.cmdline for p in answer.processes]


def test_command_lines_are_hidden_from_callers_without_the_token(with_token: Env) -> None:
    for auth in (None, ClientAuth(token="wrong-token-0123456789")):
        assert _cmdlines(with_token, auth) == [HIDDEN_CMDLINE]  # the process is listed, its arguments are not
    assert "hunter2" not in HIDDEN_CMDLINE and "token" in HIDDEN_CMDLINE  # says why
    assert _cmdlines(with_token, ClientAuth(token=TOKEN)) == [SECRET_CMDLINE]


def test_without_a_token_configured_command_lines_are_served_to_everyone(without_token: Env) -> None:
    """What docs/ARCHITECTURE.md says is exposed then (no caller can prove anything)."""
    assert _cmdlines(without_token, None) == [SECRET_CMDLINE]


def test_metric_streams_need_the_token_so_others_cannot_hold_the_slots(with_token: Env) -> None:
    channel, stub = with_token.stub(None)
    with channel:
        calls = [stub.StreamMetrics(dyno_pb2.StreamMetricsRequest(), timeout=10) for _ in range(MAX_METRIC_STREAMS)]
        for call in calls:
            with pytest.raises(grpc.RpcError) as e:
                next(call)
            assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        mine, my_stub = with_token.stub(ClientAuth(token=TOKEN))
        with mine:
            stream = my_stub.StreamMetrics(dyno_pb2.StreamMetricsRequest(), timeout=30)
            wait_for(lambda: with_token.servicer._stream_slots.open == 1)  # its slot taken, only its
            with_token.history.append(Sample(1_700_000_000_000, (Reading("load_average_1m", 1.5),)))
            sample = next(stream)
            assert [m.name for m in sample.metrics] == ["load_average_1m"]
            stream.cancel()


def test_metric_streams_stay_open_without_a_token_configured(without_token: Env) -> None:
    channel, stub = without_token.stub(None)
    with channel:
        stream = stub.StreamMetrics(dyno_pb2.StreamMetricsRequest(), timeout=30)
        wait_for(lambda: without_token.servicer._stream_slots.open == 1)
        without_token.history.append(Sample(1_700_000_000_000, (Reading("load_average_1m", 0.5),)))
        assert next(stream).metrics[0].value == 0.5
        stream.cancel()


# ---- a root dynod without a token ----------------------------------------------------------------------------------


def _security_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and "SECURITY" in r.getMessage()]


def test_a_dynod_on_loopback_without_a_token_does_not_warn(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Local callers are told apart by the kernel (dyno.daemon.callers): a root dynod on loopback does not hand
    every local user every process, so it has nothing to warn about; beyond loopback it still warns (when allowed to
    start at all: test_exposure_beyond_loopback_is_refused_unless_insecure_is_named)."""
    with caplog.at_level(logging.WARNING):
        assert warn_if_exposed(DaemonConfig(listen="127.0.0.1")) is False
        assert warn_if_exposed(DaemonConfig(listen="::1")) is False
    assert _security_warnings(caplog) == []
    with caplog.at_level(logging.WARNING):
        assert warn_if_exposed(DaemonConfig(listen="0.0.0.0", insecure_allow_unauthenticated_remote=True)) is True
    (warning,) = _security_warnings(caplog)
    assert "0.0.0.0" in warning.getMessage() and "--auth-token-file" in warning.getMessage()


def test_exposure_beyond_loopback_is_refused_unless_insecure_is_named(tmp_path: Path) -> None:
    for listen in ("0.0.0.0", "::", "10.1.2.3", "gpu001"):
        problem = exposure_refusal(DaemonConfig(listen=listen))
        assert problem is not None and "--insecure-allow-unauthenticated-remote" in problem
        assert "auth_token_file" in problem and "tls_ca" in problem
        # TLS without client certificates encrypts but identifies nobody
        tls_only = DaemonConfig(listen=listen, tls_cert=tmp_path / "c", tls_key=tmp_path / "k")
        assert exposure_refusal(tls_only) is not None
        assert exposure_refusal(DaemonConfig(listen=listen, insecure_allow_unauthenticated_remote=True)) is None
        assert exposure_refusal(DaemonConfig(listen=listen, auth_token_file=tmp_path / "t")) is None
        mtls = DaemonConfig(listen=listen, tls_cert=tmp_path / "c", tls_key=tmp_path / "k", tls_ca=tmp_path / "ca")
        assert exposure_refusal(mtls) is None
    for listen in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        assert exposure_refusal(DaemonConfig(listen=listen)) is None

"""dynod's gRPC connections are bounded (dyno.daemon.connection_limits): a cap on connections, idle ones closed,
streams per connection capped, dead peers found by keepalive pings. A real dynod (dyno.daemon.app.Daemon,
in-process) on 127.0.0.1 port 0, with some bounds made small so the test sees them act in a second."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from small_daemon import small_daemon

from dyno.daemon import connection_limits
from dyno.daemon.app import Daemon
from dyno.daemon.health import HealthServicer
from dyno.v1 import dyno_pb2, dyno_pb2_grpc

from conftest import wait_for

pytestmark = pytest.mark.unit


@pytest.fixture
def daemon(monkeypatch: pytest.MonkeyPatch) -> Iterator[Daemon]:
    monkeypatch.setattr(connection_limits, "MAX_CONNECTIONS", 8)
    monkeypatch.setattr(connection_limits, "MAX_CONNECTION_IDLE_MS", 500)
    monkeypatch.setattr(connection_limits, "KEEPALIVE_TIME_MS", 300)
    monkeypatch.setattr(connection_limits, "KEEPALIVE_TIMEOUT_MS", 300)
    with small_daemon("dyno-conn-") as daemon:
        yield daemon


def _channel(port: int) -> grpc.Channel:
    # its own subchannel (connection): grpc otherwise shares one connection between channels to the same address;
    # quick reconnects: a refused connection is otherwise retried after 1 s, then later and later
    options = [("grpc.use_local_subchannel_pool", 1), ("grpc.initial_reconnect_backoff_ms", 100)]
    options += [("grpc.min_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 300)]
    return grpc.insecure_channel(f"127.0.0.1:{port}", options=options)


def _status(channel: grpc.Channel, **kw: object) -> dyno_pb2.Status:
    return dyno_pb2_grpc.DynoStub(channel).GetStatus(dyno_pb2.GetStatusRequest(), timeout=20, **kw)


def test_many_idle_channels_are_closed_and_a_new_client_is_still_served(daemon: Daemon) -> None:
    channels = [_channel(daemon.port) for _ in range(32)]  # four times the (made small) cap of 8
    try:
        # each waits for a place when all are taken: the idle limit frees them for the next clients
        assert all(_status(ch, wait_for_ready=True).hostname == daemon.hostname for ch in channels)
        # every one of them is idle now: the server closes them (GOAWAY) and the client channels go IDLE
        wait_for(lambda: all(c._channel.check_connectivity_state(False) == 0 for c in channels), timeout_s=20)
        fresh = _channel(daemon.port)
        assert _status(fresh).hostname == daemon.hostname
        fresh.close()
    finally:
        for ch in channels:
            ch.close()


def test_past_the_connection_cap_a_new_connection_is_refused_until_one_goes(daemon: Daemon) -> None:
    """Connections with a stream in flight are not idle: they keep their places; the next is closed at once."""
    channels = [_channel(daemon.port) for _ in range(connection_limits.MAX_CONNECTIONS)]
    calls = []
    try:
        for ch in channels:  # a live metric stream on each
            call = dyno_pb2_grpc.DynoStub(ch).StreamMetrics(dyno_pb2.StreamMetricsRequest(), timeout=60)
            next(call)
            calls.append(call)
        extra = _channel(daemon.port)
        with pytest.raises(grpc.RpcError) as e:
            _status(extra)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
        for c in calls:
            c.cancel()
        assert _status(extra, wait_for_ready=True).hostname == daemon.hostname  # idle ones were closed
        extra.close()
    finally:
        for ch in channels:
            ch.close()


def test_one_connection_runs_at_most_max_concurrent_streams_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP/2's limit from the option list: one client's extra streams wait on its side, other clients are served."""
    monkeypatch.setattr(connection_limits, "MAX_CONCURRENT_STREAMS", 2)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=connection_limits.server_options())
    checks = HealthServicer()  # grpc_health's deadlocked this server when a Watch ended as another began
    checks.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(checks, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    one, other = _channel(port), _channel(port)
    try:
        stub = health_pb2_grpc.HealthStub(one)
        watches = [stub.Watch(health_pb2.HealthCheckRequest(), timeout=30) for _ in range(2)]
        assert [next(w).status for w in watches] == [health_pb2.HealthCheckResponse.SERVING] * 2
        third = stub.Watch(health_pb2.HealthCheckRequest(), timeout=1)
        with pytest.raises(grpc.RpcError) as e:
            next(third)  # never started: it waited for one of the two to end
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert health_pb2_grpc.HealthStub(other).Check(health_pb2.HealthCheckRequest(), timeout=5).status == 1
        watches[0].cancel()
        assert next(stub.Watch(health_pb2.HealthCheckRequest(), timeout=30)).status == 1  # a place is free again
    finally:
        one.close()
        other.close()
        server.stop(0)
    assert "grpc.max_connection_age_ms" not in dict(connection_limits.agent_server_options())
    assert "grpc.keepalive_time_ms" not in dict(connection_limits.agent_server_options())


_STOPPED_READER = textwrap.dedent(
    """
    import sys, grpc
    from dyno.v1 import dyno_pb2, dyno_pb2_grpc
    ch = grpc.insecure_channel(sys.argv[1])
    call = dyno_pb2_grpc.DynoStub(ch).StreamMetrics(dyno_pb2.StreamMetricsRequest(), timeout=120)
    next(call)
    print("streaming", flush=True)
    sys.stdin.read()
    """
)


def test_a_stream_of_a_peer_that_stopped_answering_is_ended_by_keepalive(daemon: Daemon) -> None:
    """A client that vanished without closing its socket (here: stopped with SIGSTOP; a crashed host or a cut link
    alike) no longer holds its stream slot and RPC thread once it misses the server's pings."""
    reader = subprocess.Popen(
        [sys.executable, "-c", _STOPPED_READER, f"127.0.0.1:{daemon.port}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline() == b"streaming\n"
        slots = daemon.servicer._stream_slots  # type: ignore[union-attr]
        assert slots.open == 1
        os.kill(reader.pid, signal.SIGSTOP)
        wait_for(lambda: slots.open == 0, timeout_s=20)
    finally:
        os.kill(reader.pid, signal.SIGCONT)
        reader.kill()
        reader.wait()

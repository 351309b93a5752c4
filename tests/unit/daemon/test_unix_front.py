"""The Unix-socket front that tells a gRPC server who calls: a real gRPC server behind it sees each caller's
kernel credentials, large answers and many connections pass whole, and a closed connection leaves no entry."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from dyno.daemon.peer_identity import PeerCred, PeerTable
from dyno.daemon.unix_front import UnixFront

from conftest import short_tmpdir, wait_for

pytestmark = pytest.mark.unit


class _Recorder(health_pb2_grpc.HealthServicer):
    def __init__(self, peers: PeerTable) -> None:
        self.peers = peers
        self.seen: list[PeerCred | None] = []

    def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        self.seen.append(self.peers.lookup(context.peer()))
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)

    def Watch(
        self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext
    ) -> Iterator[health_pb2.HealthCheckResponse]:
        big = health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)
        for _ in range(int(request.service or "1")):
            yield big


@pytest.fixture()
def front() -> Iterator[tuple[UnixFront, _Recorder]]:
    d = short_tmpdir("dyno-front-")
    peers = PeerTable()
    recorder = _Recorder(peers)
    server = grpc.server(futures.ThreadPoolExecutor(8))
    health_pb2_grpc.add_HealthServicer_to_server(recorder, server)
    server.add_insecure_port(f"unix:{d / 'inner.sock'}")
    server.start()
    f = UnixFront(d / "front.sock", d / "inner.sock", peers)
    f.start()
    try:
        yield f, recorder
    finally:
        f.stop()
        server.stop(0)
        shutil.rmtree(d, ignore_errors=True)


def test_the_server_behind_sees_the_callers_credentials(front: tuple[UnixFront, _Recorder]) -> None:
    f, recorder = front
    assert oct(os.stat(f.path).st_mode & 0o777) == oct(0o666)
    with grpc.insecure_channel(f"unix:{f.path}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for _ in range(3):
            stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert recorder.seen == [PeerCred(os.getpid(), os.geteuid(), os.getegid())] * 3
    wait_for(lambda: f.connections() == 0 and len(recorder.peers) == 0, timeout_s=5)  # closed: its entry goes


def test_streams_and_many_connections_pass_whole(front: tuple[UnixFront, _Recorder]) -> None:
    f, _ = front
    # a local subchannel pool each: one connection per channel (grpc shares them between channels by default)
    channels = [
        grpc.insecure_channel(f"unix:{f.path}", options=[("grpc.use_local_subchannel_pool", 1)]) for _ in range(20)
    ]
    try:
        for ch in channels:
            replies = list(
                health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service="2000"), timeout=10)
            )
            assert len(replies) == 2000
        assert f.connections() == 20
    finally:
        for ch in channels:
            ch.close()
    wait_for(lambda: f.connections() == 0, timeout_s=5)


def test_a_raw_client_that_half_closes_gets_the_end(front: tuple[UnixFront, _Recorder]) -> None:
    f, _ = front
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(str(f.path))
        s.sendall(b"not http/2 at all\r\n\r\n")
        s.shutdown(socket.SHUT_WR)
        while s.recv(65536):  # grpc answers and closes; the front passes the close on
            pass
    wait_for(lambda: f.connections() == 0, timeout_s=5)


def test_stop_removes_the_socket_and_drops_connections(front: tuple[UnixFront, _Recorder]) -> None:
    f, _ = front
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(f.path))
    wait_for(lambda: f.connections() == 1, timeout_s=5)
    f.stop()
    assert not f.path.exists() and f.connections() == 0
    s.close()


def test_megabytes_pass_whole_both_ways_past_the_buffers() -> None:
    """A plain socket server behind the front echoes 8 MiB; the reader is slow to start, so the front's buffers fill
    and it must stop reading (and resume) rather than drop or grow."""
    d = short_tmpdir("dyno-front-")
    payload = os.urandom(8 * 1024 * 1024)
    inner = socket.socket(socket.AF_UNIX)
    inner.bind(str(d / "inner.sock"))
    inner.listen()

    def echo() -> None:
        conn, _ = inner.accept()
        with conn:
            while data := conn.recv(1 << 16):
                conn.sendall(data)

    thread = threading.Thread(target=echo, daemon=True)
    thread.start()
    f = UnixFront(d / "front.sock", d / "inner.sock", PeerTable())
    f.start()
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(10)
            s.connect(str(f.path))
            sender = threading.Thread(target=lambda: (s.sendall(payload), s.shutdown(socket.SHUT_WR)), daemon=True)
            sender.start()
            time.sleep(0.2)
            got = bytearray()
            while data := s.recv(1 << 16):
                got += data
            sender.join(10)
        assert bytes(got) == payload
        wait_for(lambda: f.connections() == 0, timeout_s=5)
    finally:
        f.stop()
        inner.close()
        shutil.rmtree(d, ignore_errors=True)


def test_one_user_cannot_hold_every_connection() -> None:
    """Past its per-user limit a user's new connections are closed at once; others' are still relayed."""
    d = short_tmpdir("dyno-front-")
    inner = socket.socket(socket.AF_UNIX)
    inner.bind(str(d / "inner.sock"))
    inner.listen(64)

    def serve() -> None:  # closes each connection once its client has (as grpc does)
        while True:
            try:
                conn, _ = inner.accept()
            except OSError:
                return
            threading.Thread(target=lambda c=conn: (c.recv(1), c.close()), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    f = UnixFront(d / "front.sock", d / "inner.sock", PeerTable(), max_connections=8, max_per_uid=3)
    f.start()
    held = []
    try:
        for _ in range(3):
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(f.path))
            held.append(s)
        wait_for(lambda: f.connections() == 3, timeout_s=5)
        with socket.socket(socket.AF_UNIX) as extra:
            extra.settimeout(5)
            extra.connect(str(f.path))
            assert extra.recv(1) == b""  # closed: this uid holds its 3
        assert f.connections() == 3
        held.pop().close()
        wait_for(lambda: f.connections() == 2, timeout_s=5)
        again = socket.socket(socket.AF_UNIX)
        again.connect(str(f.path))
        held.append(again)
        wait_for(lambda: f.connections() == 3, timeout_s=5)  # its place is free again
    finally:
        for s in held:
            s.close()
        f.stop()
        inner.close()
        shutil.rmtree(d, ignore_errors=True)

"""libkineto in filesystem-socket mode leaves its client socket file (`dynoconfigclient<uuid>`) behind when the
trainer exits, one per process that imported torch (DataLoader workers included): dynod removes the stale ones at
start and whenever it drops a kineto process, and never one a live process is bound to."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dyno.daemon.config import DaemonConfig
from dyno.daemon.tracing.kineto_ipc import CLIENT_SOCKET_PREFIX, KinetoEndpoint, KinetoPoll, decode_message, encode_req
from dyno.daemon.tracing.subsystem import Tracing

from conftest import short_tmpdir

pytestmark = pytest.mark.unit


class _Handler:
    def kineto_poll(self, poll: KinetoPoll) -> str | None:
        return None

    def kineto_context_count(self, gpu: int, pid: int, job_id: str) -> int:
        return 0


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    d = short_tmpdir("dyno-kcs-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _bound_client(sock_dir: Path) -> socket.socket:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    c.bind(str(sock_dir / f"{CLIENT_SOCKET_PREFIX}{uuid.uuid4()}"))
    c.settimeout(5)
    return c


def _exited_client(sock_dir: Path) -> Path:
    c = _bound_client(sock_dir)
    path = Path(c.getsockname())
    c.close()  # what an exited trainer leaves: the file, with nobody bound to it
    assert path.exists()
    return path


def test_endpoint_removes_stale_client_sockets_only(sock_dir: Path) -> None:
    stale = _exited_client(sock_dir)
    not_a_socket = sock_dir / f"{CLIENT_SOCKET_PREFIX}-notes.txt"
    not_a_socket.write_text("kept")
    other = sock_dir / "unrelated.sock"
    other_sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    other_sock.bind(str(other))
    other_sock.close()
    ep = KinetoEndpoint(_Handler(), socket_dir=sock_dir)
    with _bound_client(sock_dir) as live:
        ep.start()
        try:
            assert not stale.exists(), "a dead trainer's socket left from before the daemon started"
            assert Path(live.getsockname()).exists() and not_a_socket.exists() and other.exists()
            later = _exited_client(sock_dir)
            assert ep.remove_stale_clients() == 1
            assert not later.exists() and Path(live.getsockname()).exists()
        finally:
            ep.stop()


def test_a_socket_dir_dynod_makes_lets_trainers_of_any_user_in(sock_dir: Path) -> None:
    made = sock_dir / "made" / "here"
    ep = KinetoEndpoint(_Handler(), socket_dir=made)
    ep.start()
    try:
        assert stat.S_IMODE(made.stat().st_mode) == 0o1777  # like /tmp: anyone adds a socket, none removes another's
    finally:
        ep.stop()
    own = sock_dir / "admins"
    own.mkdir(mode=0o750)
    os.chmod(own, 0o750)
    ep = KinetoEndpoint(_Handler(), socket_dir=own)
    ep.start()
    try:
        assert stat.S_IMODE(own.stat().st_mode) == 0o750  # an existing folder keeps the mode its admin gave it
    finally:
        ep.stop()


def test_abstract_endpoint_has_nothing_to_remove() -> None:
    assert KinetoEndpoint(_Handler(), name=f"dyno-unit-{uuid.uuid4().hex[:10]}").remove_stale_clients() == 0


def test_dropped_kineto_process_takes_its_socket_file_along(sock_dir: Path) -> None:
    kineto_dir = sock_dir / "kineto"
    cfg = DaemonConfig(
        trace_dir=sock_dir / "traces",
        agent_socket=sock_dir / "agent.sock",
        kineto_socket_dir=kineto_dir,
        state_dir=sock_dir / "state",
    )
    tracing = Tracing(cfg, "hostK")
    tracing.start()
    try:
        assert tracing.kineto is not None
        with _bound_client(kineto_dir) as c:
            c.sendto(encode_req(3, [os.getpid()], 0), tracing.kineto.address)
            assert decode_message(c.recv(4096))[0] == "req"
            path = Path(c.getsockname())
        assert tracing.registry.get(os.getpid()) is not None and path.exists()
        tracing.registry.remove(os.getpid(), "process exited")
        assert not path.exists()
        assert (kineto_dir / "dynolog").exists()
    finally:
        tracing.stop()

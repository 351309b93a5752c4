"""Security of libkineto's endpoint against an unprivileged local sender: any user can send datagrams to the
abstract socket, so no datagram, however malformed, and no sender that stops reading may stall or kill the IPC
thread that serves every trainer on the host."""

from __future__ import annotations

import os
import random
import socket
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.kineto_identity import KinetoIdentifier
from dyno.daemon.tracing.kineto_ipc import HEADER_SIZE, KinetoEndpoint, decode_message, encode_message, encode_req
from dyno.daemon.tracing.manager import TraceManager

pytestmark = pytest.mark.unit


def _client() -> socket.socket:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    c.bind(b"\0dynoconfigclient" + uuid.uuid4().hex.encode() + b"\0")
    c.settimeout(5)
    return c


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[tuple[KinetoEndpoint, TraceManager]]:
    registry = ProcessRegistry(silent_timeout_s=30)
    manager = TraceManager(registry, tmp_path / "traces", "hostA", kineto_identifier=KinetoIdentifier())
    ep = KinetoEndpoint(manager, name=f"dyno-sec-{uuid.uuid4().hex[:10]}")
    ep.start()
    yield ep, manager
    ep.stop()


def _answers(ep: KinetoEndpoint) -> bool:
    """Whether a well-behaved trainer still gets its poll answered."""
    with _client() as c:
        try:
            c.sendto(encode_req(3, [os.getpid()], 7), ep.address)
            kind, _payload = decode_message(c.recv(4096))
        except TimeoutError:
            return False
        return kind == "req"


def test_a_sender_that_never_reads_cannot_stall_the_endpoint(endpoint: tuple[KinetoEndpoint, TraceManager]) -> None:
    """A reply goes to the sender's own socket; one whose receive queue is full (it never reads) made the blocking
    sendto wait forever, and libkineto polls of every other trainer went unanswered."""
    ep, _ = endpoint
    with open("/proc/sys/net/unix/max_dgram_qlen") as f:
        qlen = int(f.read())
    flood = _client()
    flood.settimeout(1.0)  # a send that waits this long means the endpoint has stopped reading
    try:
        for _ in range(qlen + 20):  # more polls than its queue holds replies; it never reads them
            try:
                flood.sendto(encode_req(1, [os.getpid()], 7), ep.address)
            except TimeoutError:
                break
        assert _answers(ep)
    finally:
        flood.close()


def _boundary_datagrams(rng: random.Random) -> list[bytes]:
    ints32 = [0, 1, -1, 2**31 - 1, -(2**31), os.getpid()]
    ints64 = [0, -1, 2**63 - 1, -(2**63), 4242]
    out = [b"", b"\0" * (HEADER_SIZE - 1), b"\0" * HEADER_SIZE, b"\xff" * HEADER_SIZE, b"\xff" * 200]
    out.append(struct.pack("<Q32s", 2**64 - 1, b"req"))  # a size no datagram can carry
    out.append(encode_message("req", b""))
    out.append(encode_message("ctxt", b"\0" * 15))
    out.append(encode_message("x" * 31, b""))  # the longest type, no NUL left
    out.append(struct.pack("<Q32s", 0, b"\xff" * 32))  # a type that is not ASCII, no NUL
    for n in (0, -1, 65, 2**31 - 1, -(2**31)):
        out.append(encode_message("req", struct.pack("<iiq", 3, n, 1) + b"\0" * 8))
    for mask in ints32:
        for job in ints64:
            out.append(encode_req(mask, [os.getpid(), *rng.sample(ints32, 3)], job))
            out.append(encode_message("ctxt", struct.pack("<iiq", rng.choice(ints32), os.getpid(), job)))
    for _ in range(300):
        size = rng.choice([0, 1, 8, 16, 39, 40, 41, 56, 300, 4096])
        body = bytes(rng.getrandbits(8) for _ in range(size))
        kind = rng.choice([b"req", b"ctxt", b"", b"zzz"])
        out.append(body)
        out.append(struct.pack("<Q32s", len(body), kind) + body)
        out.append(struct.pack("<Q32s", rng.getrandbits(64), kind) + body)
    return out


def test_malformed_and_boundary_datagrams_never_stop_the_endpoint(
    endpoint: tuple[KinetoEndpoint, TraceManager],
) -> None:
    """Fuzz: random bytes, wrong sizes, unknown and non-ASCII types, pid counts out of range, every int32/int64
    boundary in type masks, ancestries, gpus and job ids, from the sender's own pid (so the handler runs)."""
    ep, manager = endpoint
    rng = random.Random(1234)
    # an unbound sender: the handler runs on its datagrams, and its replies go nowhere (none to drain)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as c:
        c.settimeout(5)
        for data in _boundary_datagrams(rng):
            c.sendto(data, ep.address)
    assert _answers(ep)
    assert ep.rejected > 0
    listed = manager._registry.list("")
    assert [p.pid for p in listed] == [os.getpid()]


@pytest.mark.skipif(os.geteuid() != 0, reason="a folder of another user needs root to make")
def test_a_kineto_socket_dir_another_user_made_is_refused(tmp_path: Path) -> None:
    """Its owner could replace dynod's `dynolog` socket with their own and hand every trainer a config of theirs
    (ACTIVITIES_LOG_FILE: where the trainer, as its user, writes)."""
    sock_dir = tmp_path / "kineto"
    sock_dir.mkdir(mode=0o1777)
    os.chown(sock_dir, 65534, 65534)
    ep = KinetoEndpoint(_NoHandler(), socket_dir=sock_dir)
    with pytest.raises(OSError, match="owned by uid 65534"):
        ep.start()
    assert not (sock_dir / "dynolog").exists()


def test_a_kineto_socket_dir_others_may_rename_in_is_refused(tmp_path: Path) -> None:
    sock_dir = tmp_path / "kineto"
    sock_dir.mkdir()
    os.chmod(sock_dir, 0o777)  # writable by all without the sticky bit: anyone may replace dynod's socket
    with pytest.raises(OSError, match="without the sticky bit"):
        KinetoEndpoint(_NoHandler(), socket_dir=sock_dir).start()
    os.chmod(sock_dir, 0o1777)  # like /tmp: fine
    ep = KinetoEndpoint(_NoHandler(), socket_dir=sock_dir)
    ep.start()
    ep.stop()


class _NoHandler:
    def kineto_poll(self, poll: object) -> None:
        return None

    def kineto_context_count(self, gpu: int, pid: int, job_id: str) -> int:
        return 1


def test_a_taken_abstract_name_says_who_holds_it() -> None:
    """Any local user can bind libkineto's name while dynod is not bound to it: the start-up error names them."""
    name = f"dyno-sec-{uuid.uuid4().hex[:10]}"
    squatter = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    squatter.bind(b"\0" + name.encode() + b"\0")
    try:
        with pytest.raises(OSError, match=rf"Address already in use \(bound by pid {os.getpid()}, uid {os.getuid()}: "):
            KinetoEndpoint(_NoHandler(), name=name).start()
    finally:
        squatter.close()

"""The Agent service against other local users: its socket is 0666 and grpc says nothing about who is calling, so
no request, however malformed, may crash a handler, and one user must not take over a live registration of another
user's trainer (the thief would receive its trace requests, and the trainer would never be traced)."""

from __future__ import annotations

import functools
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import grpc
import pytest
from agent_service_env import agent_service

from dyno.daemon import agent_admission
from dyno.daemon.agent_server import AgentServer
from dyno.daemon.agent_service import AgentServicer
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.manager import TraceManager
from dyno.v1 import agent_pb2, agent_pb2_grpc

from conftest import short_tmpdir

pytestmark = pytest.mark.unit


@pytest.fixture
def agent_env() -> Iterator[tuple[grpc.Channel, agent_pb2_grpc.AgentStub, ProcessRegistry]]:
    with agent_service(ProcessRegistry(), "dyno-secag-", "hostS") as s:
        yield s.channel, s.stub, s.registry


@pytest.fixture
def trainer() -> Iterator[int]:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield p.pid
    finally:
        p.kill()
        p.wait()


def _wait_for(cond: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def test_a_live_agent_registration_cannot_be_taken_over_by_another_register(
    agent_env: tuple[grpc.Channel, agent_pb2_grpc.AgentStub, ProcessRegistry], trainer: int
) -> None:
    _, stub, reg = agent_env
    mine = stub.Register(agent_pb2.RegisterRequest(pid=trainer, job_id="victim"), timeout=5)
    watch = stub.Watch(agent_pb2.WatchRequest(pid=trainer, session_id=mine.session_id))
    assert next(watch).keepalive  # the trainer's stream is up
    assert _wait_for(lambda: (rec := reg.get(trainer)) is not None and rec.connected)

    with pytest.raises(grpc.RpcError) as e:  # anyone on the host naming that pid
        stub.Register(agent_pb2.RegisterRequest(pid=trainer, job_id="thief"), timeout=5)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"pid: process {trainer} is registered by a connected dyno agent" in e.value.details()
    rec = reg.get(trainer)
    assert rec is not None and rec.session_id == mine.session_id and rec.job_id == "victim"

    # the trainer's own agent reconnecting (its stream ended) registers again as before
    watch.cancel()
    assert _wait_for(lambda: reg.get(trainer) is None)
    again = stub.Register(agent_pb2.RegisterRequest(pid=trainer, job_id="victim"), timeout=5)
    assert again.session_id and again.session_id != mine.session_id


_EXPECTED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.PERMISSION_DENIED,  # ReportTrace without its registration's session
}


def _code(call: Callable[[], object]) -> grpc.StatusCode:
    try:
        call()
    except grpc.RpcError as e:
        return e.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def test_boundary_and_random_agent_requests_get_a_clean_answer(
    agent_env: tuple[grpc.Channel, agent_pb2_grpc.AgentStub, ProcessRegistry], trainer: int
) -> None:
    """Every field at its limits and beyond: each call answers with a status of its own (a handler that raised
    would answer UNKNOWN), and the service still registers a well-formed trainer afterwards."""
    channel, stub, reg = agent_env
    rng = random.Random(99)
    ints = [0, 1, -1, 2**31 - 1, -(2**31), trainer]
    texts = ["", "x" * 4097, "../../etc/passwd", "a\nb", "\u202e\u00e9", "j" * 129, "0", "t.1"]
    codes = []
    for _ in range(150):
        codes.append(
            _code(
                lambda: stub.Register(
                    agent_pb2.RegisterRequest(
                        pid=rng.choice(ints),
                        ancestry=[rng.choice(ints) for _ in range(rng.choice([0, 1, 64, 65, 300]))],
                        job_id=rng.choice(texts),
                        rank=rng.choice(ints),
                        local_rank=rng.choice(ints),
                        world_size=rng.choice(ints),
                        gpu=rng.choice(ints),
                        cmdline=rng.choice(texts),
                        hostname=rng.choice(texts),
                        pid_namespace=rng.choice(["", "1", "x" * 5000]),
                    ),
                    timeout=5,
                )
            )
        )
        codes.append(
            _code(
                lambda: stub.ReportTrace(
                    agent_pb2.ReportTraceRequest(
                        pid=rng.choice(ints),
                        trace_id=rng.choice(texts),
                        state=rng.choice([0, 1, 3, 4, 5, 99, -1]),  # type: ignore[arg-type]
                        path=rng.choice(texts),
                        size_bytes=rng.choice([0, 2**64 - 1]),
                        error=rng.choice(texts),
                    ),
                    timeout=5,
                )
            )
        )
        codes.append(
            _code(
                lambda: list(
                    stub.Watch(agent_pb2.WatchRequest(pid=rng.choice(ints), session_id=rng.choice(texts)), timeout=5)
                )
            )
        )
    raw = [b"", b"\xff" * 7, bytes(rng.getrandbits(8) for _ in range(300)), b"\x08" + b"\xff" * 10]
    for method in ("/dyno.v1.Agent/Register", "/dyno.v1.Agent/ReportTrace"):
        call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        for body in raw:
            codes.append(_code(functools.partial(call, body, timeout=5)))
    unexpected = {c for c in codes if c not in _EXPECTED}  # unparsable bodies: INVALID_ARGUMENT, never INTERNAL
    assert unexpected == set()
    assert stub.Register(agent_pb2.RegisterRequest(pid=trainer, job_id="ok"), timeout=5).session_id
    assert reg.get(trainer) is not None


def test_a_thread_or_a_kernel_thread_is_not_a_process_to_register(
    agent_env: tuple[grpc.Channel, agent_pb2_grpc.AgentStub, ProcessRegistry],
) -> None:
    """Thread ids answer kill(pid, 0) like processes: every thread on the host was a pid anyone could register,
    enough to fill the registry's caps (the kineto path's too) on a busy host."""
    _, stub, reg = agent_env
    ready, done = threading.Event(), threading.Event()
    tid: list[int] = []

    def worker() -> None:
        tid.append(threading.get_native_id())
        ready.set()
        done.wait(30)

    t = threading.Thread(target=worker)
    t.start()
    try:
        ready.wait(10)
        with pytest.raises(grpc.RpcError) as e:
            stub.Register(agent_pb2.RegisterRequest(pid=tid[0], job_id="j"), timeout=5)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert f"pid: {tid[0]} is a thread of process {os.getpid()}" in e.value.details()
    finally:
        done.set()
        t.join()
    kthreadd = 2  # the kernel's thread creator, pid 2 in the host's pid namespace
    if _is_kernel_thread(kthreadd):
        with pytest.raises(grpc.RpcError) as e:
            stub.Register(agent_pb2.RegisterRequest(pid=kthreadd, job_id="j"), timeout=5)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "kernel thread" in e.value.details()
    assert len(reg) == 0


def _is_kernel_thread(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return bool(int(f.read().rsplit(b")", 1)[1].split()[6]) & 0x00200000)
    except (OSError, IndexError, ValueError):
        return False


def test_registrations_that_never_watch_are_bounded(
    agent_env: tuple[grpc.Channel, agent_pb2_grpc.AgentStub, ProcessRegistry],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A registration without its Watch stream stays until garbage collection (30 s), and anyone can register any
    live process: re-registering others' processes in a loop kept the registry full for every trainer (kineto too).
    An agent opens its stream right after Register, so registrations waiting for one are capped."""
    _, stub, reg = agent_env
    monkeypatch.setattr(agent_admission, "MAX_UNWATCHED", 3)
    sleepers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(5)]
    try:
        for p in sleepers[:3]:
            stub.Register(agent_pb2.RegisterRequest(pid=p.pid, job_id="j"), timeout=5)
        with pytest.raises(grpc.RpcError) as e:
            stub.Register(agent_pb2.RegisterRequest(pid=sleepers[3].pid, job_id="j"), timeout=5)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "3 agent registrations are waiting for their Watch stream" in e.value.details()
        assert len(reg) == 3
        # a registration that opens its stream makes room for the next
        first = reg.get(sleepers[0].pid)
        assert first is not None
        watch = stub.Watch(agent_pb2.WatchRequest(pid=first.pid, session_id=first.session_id))
        assert next(watch).keepalive
        assert stub.Register(agent_pb2.RegisterRequest(pid=sleepers[3].pid, job_id="j"), timeout=5).session_id
        watch.cancel()
        # and ones left waiting past the grace period are dropped for new ones
        monkeypatch.setattr(agent_admission, "UNWATCHED_GRACE_S", 0.0)
        assert stub.Register(agent_pb2.RegisterRequest(pid=sleepers[4].pid, job_id="j"), timeout=5).session_id
        assert reg.get(sleepers[4].pid) is not None
    finally:
        for p in sleepers:
            p.kill()
            p.wait()


def test_an_agent_socket_in_a_folder_others_may_rename_in_is_refused() -> None:
    """Whoever can rename entries there can put a socket of their own in place of dynod's: trainers would take
    their trace requests, output paths included (where the agent writes, as its user), from them."""
    d = short_tmpdir("dyno-secsock-")
    try:
        shared = d / "shared"
        shared.mkdir()
        os.chmod(shared, 0o777)
        server = AgentServer(
            AgentServicer(TraceManager(ProcessRegistry(), d / "t", "h"), ProcessRegistry()), shared / "a.sock"
        )
        with pytest.raises(OSError, match="without the sticky bit"):
            server.start()
        assert not (shared / "a.sock").exists()
        os.chmod(shared, 0o1777)  # like /tmp: others cannot replace dynod's socket
        server.start()
        server.stop(0)
    finally:
        shutil.rmtree(d, ignore_errors=True)

"""The process registry is bounded: any local user may register (the agent socket is 0666, the kineto endpoint an
abstract socket), so a buggy launcher or a hostile process could otherwise fill it without end. A total cap, a cap
per uid, dead pids dropped before a refusal, and pids that name no process refused. Unit tests on the registry, the
Agent service on a real Unix socket, and the kineto path through the trace manager."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from agent_service_env import agent_service
from manual_clock import Clock

from dyno.daemon import registry as registry_module
from dyno.daemon.registered_process import PROTOCOL_AGENT, PROTOCOL_KINETO, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry, RegistryFullError, pid_uid
from dyno.daemon.tracing.kineto_identity import KinetoIdentifier
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.manager import TraceManager
from dyno.v1 import agent_pb2, agent_pb2_grpc

pytestmark = pytest.mark.unit


class World:
    """Which fake pids are alive and whose they are."""

    def __init__(self) -> None:
        self.alive: set[int] = set()
        self.uids: dict[int, int] = {}
        self.alive_checks = 0

    def spawn(self, pid: int, uid: int) -> int:
        self.alive.add(pid)
        self.uids[pid] = uid
        return pid

    def is_alive(self, pid: int) -> bool:
        self.alive_checks += 1
        return pid in self.alive

    def uid_of(self, pid: int) -> int:
        return self.uids.get(pid, -1)


def _registry(world: World, clock: Clock, *, total: int = 4, per_uid: int = 3) -> ProcessRegistry:
    return ProcessRegistry(
        is_alive=world.is_alive, uid_of=world.uid_of, clock_ms=clock, max_processes=total, max_per_uid=per_uid
    )


def _agent(pid: int, job: str = "J") -> RegisteredProcess:
    return RegisteredProcess(pid=pid, job_id=job, protocol=PROTOCOL_AGENT, connected=True)


def test_per_uid_cap_refuses_one_user_and_leaves_room_for_others() -> None:
    world, clock = World(), Clock()
    reg = _registry(world, clock)
    for pid in (11, 12, 13):
        reg.register(_agent(world.spawn(pid, uid=1000)))
    with pytest.raises(RegistryFullError) as e:
        reg.register(_agent(world.spawn(14, uid=1000)))
    assert str(e.value) == (
        "3 processes of uid 1000 are registered with this daemon, the limit per user (3, dynod's "
        "max_processes_per_uid); pid 14 is not registered"
    )
    assert reg.register(_agent(world.spawn(21, uid=2000))).uid == 2000  # another user still gets in
    assert reg.uid_counts() == {1000: 3, 2000: 1}
    assert reg.get(14) is None and len(reg) == 4


def test_total_cap_and_refreshing_a_registered_pid_is_always_allowed() -> None:
    world, clock = World(), Clock()
    reg = _registry(world, clock, total=4, per_uid=4)
    for pid, uid in ((11, 1), (12, 2), (13, 3), (14, 4)):
        reg.register(_agent(world.spawn(pid, uid)))
    with pytest.raises(
        RegistryFullError,
        match=r"^4 processes are registered with this daemon, its limit \(4, dynod's max_processes\); pid 15",
    ):
        reg.register(_agent(world.spawn(15, uid=5)))
    clock.ms += 5000
    again = reg.register(_agent(12, job="J2"))  # the same process registering again (a new session, job)
    assert again.job_id == "J2" and again.last_seen_ms == clock() and len(reg) == 4


def test_dead_pids_are_dropped_before_refusing_and_listeners_hear_it() -> None:
    world, clock = World(), Clock()
    reg = _registry(world, clock)
    heard: list[tuple[int, str]] = []
    reg.add_removal_listener(lambda rec, reason: heard.append((rec.pid, reason)))
    for pid in (11, 12, 13):
        reg.register(_agent(world.spawn(pid, uid=1000)))
    world.alive.discard(12)  # exited; garbage collection has not run yet
    rec = reg.register(_agent(world.spawn(14, uid=1000)))
    assert rec.pid == 14 and sorted(p.pid for p in reg.list()) == [11, 13, 14]
    assert heard == [(12, "process exited")]
    assert reg.uid_counts() == {1000: 3}


def test_a_flood_of_refused_calls_prunes_at_most_once_per_interval() -> None:
    world, clock = World(), Clock()
    reg = _registry(world, clock, total=4, per_uid=4)
    for pid in range(11, 15):
        reg.register(_agent(world.spawn(pid, uid=1000 + pid)))
    world.alive_checks = 0
    for pid in range(100, 200):
        with pytest.raises(RegistryFullError):
            reg.register(_agent(world.spawn(pid, uid=7)))
    assert world.alive_checks == 4  # one pass over the 4 entries, not one per refused call
    clock.ms += registry_module.PRUNE_EVERY_MS
    world.alive.discard(11)
    assert reg.register(_agent(200)).pid == 200  # the next pass, a second later, finds the dead one


def test_counts_follow_every_removal_and_a_pid_reused_by_another_uid() -> None:
    world, clock = World(), Clock()
    reg = _registry(world, clock, total=10, per_uid=2)
    reg.register(RegisteredProcess(pid=11, job_id="J", protocol=PROTOCOL_AGENT, session_id="s1"))
    reg.register(_agent(world.spawn(12, uid=1000)))
    reg.register(RegisteredProcess(pid=13, job_id="J", protocol=PROTOCOL_KINETO, uid=1000, start_time=5))
    assert reg.uid_counts() == {-1: 1, 1000: 2}  # pid 11 names no process here: its uid is unknown
    reg.remove(11, "gone", session_id="s1")
    reg.set_busy(12, "t1")
    reg.touch(13)
    assert reg.uid_counts() == {1000: 2}
    # pid 13 reused by a process of another user: it moves to that user's count
    reg.register(RegisteredProcess(pid=13, job_id="J", protocol=PROTOCOL_KINETO, uid=2000, start_time=9))
    assert reg.uid_counts() == {1000: 1, 2000: 1}
    world.alive.clear()
    reg.collect_garbage()
    assert reg.uid_counts() == {} and len(reg) == 0


def test_pid_uid_reads_the_owner_of_proc_pid() -> None:
    assert pid_uid(os.getpid()) == os.getuid()
    assert pid_uid(-5) == -1 and pid_uid(2**31 - 1) == -1


# -- the Agent service on a real Unix socket -------------------------------------------------------------------


@pytest.fixture
def agent_env() -> Iterator[tuple[agent_pb2_grpc.AgentStub, ProcessRegistry]]:
    with agent_service(ProcessRegistry(max_processes=10, max_per_uid=3), "dyno-regb-", "hostB") as s:
        yield s.stub, s.registry


def _sleepers(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(n)]


def _register(stub: agent_pb2_grpc.AgentStub, pid: int) -> agent_pb2.RegisterResponse:
    return stub.Register(agent_pb2.RegisterRequest(pid=pid, job_id="J", gpu=-1), timeout=5)


def test_agent_register_refuses_pids_that_name_no_process(
    agent_env: tuple[agent_pb2_grpc.AgentStub, ProcessRegistry],
) -> None:
    stub, reg = agent_env
    (gone,) = _sleepers(1)
    gone.kill()
    gone.wait()
    for pid in (gone.pid, 2**31 - 1):
        with pytest.raises(grpc.RpcError) as e:
            _register(stub, pid)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert e.value.details().startswith(f"pid: no process {pid} on this host")
    assert len(reg) == 0


def test_agent_register_past_the_per_uid_cap_is_resource_exhausted_and_dead_ones_make_room(
    agent_env: tuple[agent_pb2_grpc.AgentStub, ProcessRegistry], caplog: pytest.LogCaptureFixture
) -> None:
    stub, reg = agent_env
    procs = _sleepers(4)
    try:
        for p in procs[:3]:
            assert _register(stub, p.pid).session_id
        with caplog.at_level(logging.WARNING, logger="dyno.daemon.agent_service"):
            with pytest.raises(grpc.RpcError) as e:
                _register(stub, procs[3].pid)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert e.value.details() == (
            f"3 processes of uid {os.getuid()} are registered with this daemon, the limit per user (3, dynod's "
            "max_processes_per_uid); "
            f"pid {procs[3].pid} is not registered"
        )
        assert any("agent registration refused" in r.getMessage() for r in caplog.records)  # the operator knows
        assert reg.uid_counts() == {os.getuid(): 3}
        procs[0].kill()
        procs[0].wait()
        reg._last_prune_ms = None  # the refusal above just pruned; the next may prune again at once
        assert _register(stub, procs[3].pid).session_id  # the dead one was dropped first
        assert sorted(p.pid for p in reg.list()) == sorted(p.pid for p in procs[1:])
    finally:
        for p in procs:
            p.kill()
            p.wait()


# -- the kineto path -------------------------------------------------------------------------------------------


def test_kineto_polls_past_the_cap_are_not_registered_and_get_no_config(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    world, clock = World(), Clock()
    reg = _registry(world, clock, total=10, per_uid=2)
    identifier = KinetoIdentifier(lambda pid, name, limit: (_ for _ in ()).throw(OSError(2, "no /proc here")))
    tm = TraceManager(reg, tmp_path / "traces", "hostK", clock_ms=clock, kineto_identifier=identifier)
    for pid in (31, 32):
        world.spawn(pid, 1000)
        assert tm.kineto_poll(KinetoPoll(pid=pid, ancestry=(), job_id="7", type_mask=3, uid=1000)) is None
    with caplog.at_level(logging.WARNING, logger="dyno.daemon.tracing.kineto_side"):
        for _ in range(3):  # libkineto polls every 5 s
            assert (
                tm.kineto_poll(KinetoPoll(pid=world.spawn(33, 1000), ancestry=(), job_id="7", type_mask=3, uid=1000))
                is None
            )
    assert sorted(p.pid for p in reg.list()) == [31, 32]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "kineto poll not registered: 2 processes of uid 1000" in warnings[0]
    # the kernel's uid counts, so another user's trainer still registers
    assert tm.kineto_poll(KinetoPoll(pid=world.spawn(41, 2000), ancestry=(), job_id="7", type_mask=3, uid=2000)) is None
    assert reg.get(41) is not None and reg.get(41).uid == 2000

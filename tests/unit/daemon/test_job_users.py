"""A user's process may not join a job whose registered processes are another user's (dyno.daemon.job_users): the
rule, the registry that applies it to both protocols, and what an agent and a libkineto process are told."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from fake_proc import no_proc_identifier

from dyno.daemon.agent_server import AgentServer
from dyno.daemon.agent_service import AgentServicer
from dyno.daemon.job_users import JobConflict, JobOfAnotherUserError, JobUsers
from dyno.daemon.registered_process import PROTOCOL_AGENT, PROTOCOL_KINETO, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.manager import TraceManager
from dyno.error_reasons import ErrorReason, reason_of
from dyno.v1 import agent_pb2, agent_pb2_grpc

from conftest import short_tmpdir

pytestmark = pytest.mark.unit

ALICE, BOB, ROOT = 1001, 1002, 0


def test_a_job_of_another_users_processes_is_refused_one_with_own_processes_is_not() -> None:
    users = JobUsers()
    users.add(["train"], ALICE)
    assert users.conflict(["train"], BOB) == JobConflict("train", (ALICE,))
    assert users.conflict(["train"], ALICE) is None
    assert users.conflict(["other"], BOB) is None  # a new job is anyone's
    users.add(["train"], BOB)  # (an admin let bob's process in): bob may add more, carol may not
    assert users.conflict(["train"], BOB) is None
    assert users.conflict(["train"], 1003) == JobConflict("train", (ALICE, BOB))
    users.remove(["train"], ALICE)
    users.remove(["train"], BOB)
    assert users.conflict(["train"], 1003) is None  # no process left: the id is free again


def test_ids_that_name_no_job_and_unknown_users_are_not_checked() -> None:
    users = JobUsers()
    users.add(["", "0", "x"], ALICE)
    assert users.conflict(["0"], BOB) is None and users.conflict([""], BOB) is None
    assert users.conflict(["x"], -1) is None  # nothing can be said of a process of unknown uid
    users.add(["y"], -1)
    assert users.conflict(["y"], BOB) is None  # nor of one already registered
    assert users.conflict(["0", "x"], BOB) == JobConflict("x", (ALICE,))  # an alias counts as the job


def _registry(uids: dict[int, int], admins: frozenset[int] = frozenset({ROOT})) -> ProcessRegistry:
    return ProcessRegistry(
        is_alive=lambda pid: True, uid_of=lambda pid: uids.get(pid, -1), job_admin=admins.__contains__
    )


def _proc(pid: int, job: str, protocol: str = PROTOCOL_AGENT) -> RegisteredProcess:
    return RegisteredProcess(pid=pid, job_id=job, protocol=protocol)


def test_the_registry_refuses_a_process_joining_another_users_job_unless_its_user_is_an_admin() -> None:
    reg = _registry({10: ALICE, 11: ALICE, 20: BOB, 30: ROOT})
    reg.register(_proc(10, "alice-job"))
    reg.register(_proc(11, "alice-job"))  # her own job: another rank joins
    with pytest.raises(JobOfAnotherUserError) as refused:
        reg.register(_proc(20, "alice-job"))
    assert str(refused.value).startswith(
        "job 'alice-job' has registered processes of another user (uid 1001): process 20 of uid 1002 may not join it"
    )
    assert "DYNO_JOB_ID" in str(refused.value)
    assert reg.get(20) is None and [p.pid for p in reg.list("alice-job")] == [10, 11]
    reg.register(_proc(30, "alice-job"))  # root's process joins any job
    reg.register(_proc(20, "bob-job"))
    reg.remove(10, "process exited")
    reg.remove(11, "process exited")
    reg.remove(30, "process exited")
    reg.register(_proc(20, "alice-job"))  # the job's processes are gone: the id is free again


def test_without_a_job_admin_rule_any_process_joins_any_job() -> None:
    reg = ProcessRegistry(is_alive=lambda pid: True, uid_of={10: ALICE, 20: BOB}.__getitem__)
    reg.register(_proc(10, "j"))
    reg.register(_proc(20, "j"))
    assert [p.pid for p in reg.list("j")] == [10, 20]


def test_a_libkineto_process_joining_another_users_job_is_not_registered(tmp_path: Path) -> None:
    reg = _registry({10: ALICE})
    tm = TraceManager(reg, tmp_path / "traces", "hostJ", kineto_identifier=no_proc_identifier())
    reg.register(_proc(10, "7"))
    assert tm.kineto_poll(KinetoPoll(pid=20, ancestry=(), job_id="7", type_mask=3, uid=BOB)) is None
    assert reg.get(20) is None
    tm.kineto_poll(KinetoPoll(pid=21, ancestry=(), job_id="0", type_mask=3, uid=BOB))  # no job: everyone's
    assert reg.get(21) is not None and reg.get(21).protocol == PROTOCOL_KINETO  # type: ignore[union-attr]


@pytest.fixture
def two_trainers() -> Iterator[tuple[int, int]]:
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2)]
    try:
        yield procs[0].pid, procs[1].pid
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_an_agent_is_told_why_with_the_reason(two_trainers: tuple[int, int], tmp_path: Path) -> None:
    alices, bobs = two_trainers
    reg = ProcessRegistry(uid_of={alices: ALICE, bobs: BOB}.__getitem__, job_admin=lambda uid: uid == ROOT)
    d = short_tmpdir("dyno-jobu-")
    server = AgentServer(AgentServicer(TraceManager(reg, tmp_path / "traces", "hostJ"), reg), d / "agent.sock")
    server.start()
    try:
        with grpc.insecure_channel(f"unix:{server.path}") as channel:
            agent = agent_pb2_grpc.AgentStub(channel)
            agent.Register(agent_pb2.RegisterRequest(pid=alices, job_id="alice-job"), timeout=5)
            with pytest.raises(grpc.RpcError) as refused:
                agent.Register(agent_pb2.RegisterRequest(pid=bobs, job_id="alice-job"), timeout=5)
    finally:
        server.stop(0)
        shutil.rmtree(d, ignore_errors=True)
    e = refused.value
    assert e.code() == grpc.StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]
    assert reason_of(e.trailing_metadata()) == ErrorReason.JOB_OF_ANOTHER_USER.value  # type: ignore[attr-defined]
    assert "has registered processes of another user (uid 1001)" in e.details()  # type: ignore[attr-defined]

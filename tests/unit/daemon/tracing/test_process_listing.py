"""The whole registry's ListProcesses answer kept between calls (dyno.daemon.tracing.process_listing): never stale.
After any change of the registry (a process added, removed, refreshed, busy, moved to another job, given another
command line or ancestry) the next answer is the one built from scratch, for an admin and for a local user alike
(another user's command lines hidden), and one caller's kept answer is never another's. **Why it is kept:** 50
callers polling ListProcesses over 1,000 processes saturated dynod's GIL (bench/registry_scale.py)."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest
from fake_proc import no_proc_identifier
from manual_clock import Clock

from dyno.daemon.callers import ADMIN, Caller
from dyno.daemon.registered_process import PROTOCOL_AGENT, PROTOCOL_KINETO, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.process_listing import OTHERS_CMDLINE, ProcessFields, RolesCache, WholeListing
from dyno.daemon.tracing.service import TraceRpcs
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit

ALICE = Caller(uid=1001, admin=False, how="unix socket")
BOB = Caller(uid=1002, admin=False, how="unix socket")


def _setup(tmp_path: Path, callers: list[Caller]) -> tuple[ProcessRegistry, TraceManager, TraceRpcs, Clock]:
    clock = Clock(ms=1_000_000)
    reg = ProcessRegistry(is_alive=lambda pid: True, uid_of=lambda pid: 1001, clock_ms=clock)
    manager = TraceManager(reg, tmp_path / "traces", "h", clock_ms=clock, kineto_identifier=no_proc_identifier())
    return reg, manager, TraceRpcs(manager, reg, "h", caller_of=lambda context: callers[0]), clock


def _answer(rpcs: TraceRpcs, job_id: str = "") -> bytes:
    return rpcs.ListProcessesEncoded(dyno_pb2.ListProcessesRequest(job_id=job_id), None)  # type: ignore[arg-type]


def _fresh(reg: ProcessRegistry, manager: TraceManager, caller: Caller) -> bytes:
    """The answer of a TraceRpcs that never answered before (nothing kept)."""
    return _answer(TraceRpcs(manager, reg, "h", caller_of=lambda context: caller))


def _record(pid: int, rng: random.Random) -> RegisteredProcess:
    kineto = rng.random() < 0.5
    return RegisteredProcess(
        pid=pid,
        job_id=f"job{rng.randrange(3)}",
        protocol=PROTOCOL_KINETO if kineto else PROTOCOL_AGENT,
        ancestry=(rng.choice([1000, 1001, 1002, 1003]),),
        cmdline="" if kineto else f"python train.py --secret {rng.randrange(99)}",
        uid=rng.choice([1001, 1002]),
    )


def test_after_any_change_the_answer_is_the_one_built_from_scratch(tmp_path: Path) -> None:
    callers = [ADMIN]
    reg, manager, rpcs, clock = _setup(tmp_path, callers)
    rng = random.Random(5)
    for pid in range(1000, 1040):
        reg.register(_record(pid, rng))
    for step in range(300):
        op = rng.randrange(7)
        pid = rng.randrange(1000, 1050)
        if op == 0:
            reg.register(_record(pid, rng))  # a new process, or one re-registered with other fields
        elif op == 1:
            reg.remove(pid, "test")
        elif op == 2:
            reg.touch(pid)  # last_seen_ms only
        elif op == 3:
            reg.set_busy(pid, rng.choice(["", "t1"]))
        elif op == 4:
            callers[0] = rng.choice([ADMIN, ALICE, BOB])  # another caller: another visibility
        elif op == 5:
            clock.ms += rng.choice([1, 400, 1000])
        for caller in (callers[0], ADMIN):
            callers[0], was = caller, callers[0]
            assert _answer(rpcs) == _fresh(reg, manager, caller), f"step {step}, op {op}"
            callers[0] = was


def test_a_local_users_kept_answer_hides_other_users_command_lines_and_is_not_the_admins(tmp_path: Path) -> None:
    callers = [ADMIN]
    reg, _, rpcs, _ = _setup(tmp_path, callers)
    reg.register(RegisteredProcess(pid=11, job_id="j", protocol=PROTOCOL_AGENT, cmdline="alice.py", uid=1001))
    reg.register(RegisteredProcess(pid=12, job_id="j", protocol=PROTOCOL_AGENT, cmdline="bob.py --key=s", uid=1002))

    def listed(caller: Caller) -> dict[int, str]:
        callers[0] = caller
        answer = dyno_pb2.ListProcessesResponse.FromString(_answer(rpcs))
        return {p.pid: p.cmdline for p in answer.processes}

    for _ in range(2):  # built, then kept
        assert listed(ADMIN) == {11: "alice.py", 12: "bob.py --key=s"}
        assert listed(ALICE) == {11: "alice.py", 12: OTHERS_CMDLINE}
        assert listed(BOB) == {11: OTHERS_CMDLINE, 12: "bob.py --key=s"}
    reg.touch(12)  # a patched answer hides it as well
    assert listed(ALICE) == {11: "alice.py", 12: OTHERS_CMDLINE}


def test_a_new_process_that_makes_a_launcher_shows_in_the_next_answer_at_once(tmp_path: Path) -> None:
    reg, _, rpcs, _ = _setup(tmp_path, [ADMIN])
    reg.register(RegisteredProcess(pid=21, job_id="j", protocol=PROTOCOL_AGENT))

    def roles() -> dict[int, int]:
        return {p.pid: p.role for p in dyno_pb2.ListProcessesResponse.FromString(_answer(rpcs)).processes}

    assert roles() == {21: dyno_pb2.PROCESS_ROLE_TRAINER}
    reg.register(RegisteredProcess(pid=22, job_id="j", protocol=PROTOCOL_AGENT, ancestry=(21,)))  # no clock move
    assert roles() == {21: dyno_pb2.PROCESS_ROLE_LAUNCHER, 22: dyno_pb2.PROCESS_ROLE_TRAINER}


def test_the_registry_keeps_its_order_across_refreshes_and_says_what_changed() -> None:
    reg = ProcessRegistry(is_alive=lambda pid: True, uid_of=lambda pid: 1)
    for pid, job in ((3, "b"), (1, "b"), (2, "a")):
        reg.register(RegisteredProcess(pid=pid, job_id=job, protocol=PROTOCOL_AGENT))
    r0, procs = reg.listing()
    assert [(p.job_id, p.pid) for p in procs] == [("a", 2), ("b", 1), ("b", 3)]
    reg.touch(1)
    r1, again = reg.listing()
    assert r1 == r0  # a refresh changes no role
    assert [p.pid for p in again] == [2, 1, 3] and again[1] is reg.get(1) and again[1] is not procs[1]
    reg.register(RegisteredProcess(pid=1, job_id="a", protocol=PROTOCOL_AGENT))  # another job: another place
    r2, moved = reg.listing()
    assert r2 > r1 and [(p.job_id, p.pid) for p in moved] == [("a", 1), ("a", 2), ("b", 3)]
    assert [p.pid for p in reg.list("b")] == [3]


def test_roles_are_worked_out_again_after_the_worker_checks_age() -> None:
    clock = Clock(ms=1_000_000)
    calls: list[int] = []

    def roles_of(procs: list[RegisteredProcess]) -> dict[int, str]:
        calls.append(len(procs))
        return {p.pid: "trainer" for p in procs}

    cache = RolesCache(roles_of, clock)
    first = cache.roles(1, [])
    clock.ms += 999
    assert cache.roles(1, []) is first and len(calls) == 1
    assert cache.roles(2, []) is first and len(calls) == 2  # another version: worked out again (same value kept)
    clock.ms += 1000
    cache.roles(2, [])
    assert len(calls) == 3


def test_the_kept_answers_stay_within_their_byte_budget_the_least_recently_built_going_first() -> None:
    procs = [
        RegisteredProcess(pid=pid, job_id="j" * 1000, protocol=PROTOCOL_AGENT, uid=1001) for pid in range(10, 20)
    ]  # no command line to hide: every caller's answer is as long
    roles = {p.pid: "trainer" for p in procs}
    size = len(WholeListing(ProcessFields()).processes(procs, roles, ADMIN))
    listing = WholeListing(ProcessFields(), max_bytes=size * 5 // 2)  # two answers, not three
    callers = [ADMIN, ALICE, BOB, Caller(uid=1003, admin=False, how="unix socket")]
    first = {}
    for caller in callers:
        first[caller.uid] = listing.processes(procs, roles, caller)
        assert 0 < listing.kept_bytes <= size * 5 // 2
    last = callers[-1]
    assert listing.processes(procs, roles, last) is first[last.uid]  # kept
    again = listing.processes(procs, roles, ADMIN)
    assert again == first[ADMIN.uid] and again is not first[ADMIN.uid]  # evicted, built again
    assert listing.kept_bytes <= size * 5 // 2


def test_a_jobs_roles_read_slowly_hold_up_no_other_listing(tmp_path: Path) -> None:
    """A per-job ListProcesses works its roles out (TraceManager.roles may read /proc) before it takes the lock
    around the shared caches: the whole registry's answer meanwhile is not kept waiting."""
    reg, manager, rpcs, _ = _setup(tmp_path, [ADMIN])
    reg.register(RegisteredProcess(pid=31, job_id="j", protocol=PROTOCOL_AGENT))
    reading, release = threading.Event(), threading.Event()
    roles_of = manager.roles

    def slow_roles(procs: list[RegisteredProcess]) -> dict[int, str]:
        if threading.current_thread().name == "job-listing":
            reading.set()
            release.wait(10)
        return roles_of(procs)

    manager.roles = slow_roles  # type: ignore[method-assign]
    job_answers: list[bytes] = []
    job = threading.Thread(target=lambda: job_answers.append(_answer(rpcs, "j")), name="job-listing", daemon=True)
    whole_answers: list[bytes] = []
    whole = threading.Thread(target=lambda: whole_answers.append(_answer(rpcs)), daemon=True)
    try:
        job.start()
        assert reading.wait(10)
        whole.start()
        whole.join(5)
        assert whole_answers, "the whole listing waited for a job's roles"
    finally:
        release.set()
        job.join(10)
        whole.join(10)
    assert [p.pid for p in dyno_pb2.ListProcessesResponse.FromString(job_answers[0]).processes] == [31]

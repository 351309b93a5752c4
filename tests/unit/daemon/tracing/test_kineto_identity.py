"""A kineto trainer's job id from its /proc/<pid>/environ (the agent's rule, shared in dyno.job_ids), the fall back
to libkineto's integer on every failure, the per-registration cache (pid reuse), and alias matching in the manager.
All /proc reads go through a fake reader."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Mapping
from pathlib import Path

import pytest
from manual_clock import Clock

from dyno.client.agent import env as agent_env
from dyno.daemon.registered_process import PROTOCOL_AGENT, PROTOCOL_KINETO, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.kineto_identity import (
    MAX_ENVIRON_BYTES,
    KinetoIdentifier,
    KinetoIdentity,
    parse_environ,
    read_proc_file,
)
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import TraceSpec, TraceState
from dyno.job_ids import JOB_ID_VARIABLES, job_id_from_env

pytestmark = pytest.mark.unit

ARRAY_TASK = {"SLURM_ARRAY_JOB_ID": "36199", "SLURM_ARRAY_TASK_ID": "0", "SLURM_JOB_ID": "36200"}


def environ(env: Mapping[str, str]) -> bytes:
    return b"".join(f"{k}={v}".encode("utf-8", "surrogateescape") + b"\0" for k, v in env.items())


class FakeProc:
    """pid -> environ bytes (or an OSError to raise); counts reads per (pid, file)."""

    def __init__(self) -> None:
        self.environ: dict[int, bytes | OSError] = {}
        self.cmdline: dict[int, bytes] = {}
        self.reads: list[tuple[int, str]] = []
        self.during_read: list[bool] = []  # hook results (the manager's lock state)
        self.hook = lambda: False

    def __call__(self, pid: int, name: str, limit: int) -> bytes:
        self.reads.append((pid, name))
        self.during_read.append(self.hook())
        if name == "cmdline":
            return self.cmdline.get(pid, b"python\0train.py\0")[: limit + 1]
        data = self.environ.get(pid, OSError(errno.ENOENT, "No such file or directory"))
        if isinstance(data, OSError):
            raise data
        return data[: limit + 1]

    def environ_reads(self, pid: int) -> int:
        return self.reads.count((pid, "environ"))


# -- the shared rule ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"DYNO_JOB_ID": " d ", **ARRAY_TASK}, "d"),
        (ARRAY_TASK, "36199_0"),
        ({"SLURM_JOB_ID": "36200", "SLURM_ARRAY_JOB_ID": "36199"}, "36200"),
        ({"SLURM_JOB_ID": "4242", "TORCHELASTIC_RUN_ID": "t"}, "4242"),
        ({"TORCHELASTIC_RUN_ID": "run-7"}, "run-7"),
        ({"TORCHELASTIC_RUN_ID": "None"}, ""),
        ({}, ""),
    ],
)
def test_agent_and_daemon_share_one_rule(env: dict[str, str], expected: str) -> None:
    assert job_id_from_env(env) == expected
    assert agent_env.resolve_job_id(None, env) == expected  # the agent goes through the same function
    assert job_id_from_env(parse_environ(environ(env))) == expected  # and so does an environ block


def test_parse_environ_keeps_first_definition_and_only_job_variables() -> None:
    data = b"PATH=/bin\0SLURM_JOB_ID=1\0junk-without-equals\0SLURM_JOB_ID=2\0DYNO_JOB_ID=a=b\0\0"
    assert parse_environ(data) == {"SLURM_JOB_ID": "1", "DYNO_JOB_ID": "a=b"}
    assert set(parse_environ(environ(dict.fromkeys(JOB_ID_VARIABLES, "x")))) == set(JOB_ID_VARIABLES)


def test_read_proc_file_reads_at_most_one_byte_past_the_limit(tmp_path: Path) -> None:
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "environ").write_bytes(b"A=1\0" * 100)
    assert read_proc_file(42, "environ", 8, proc_root=tmp_path) == b"A=1\0A=1\0A"
    with pytest.raises(FileNotFoundError):
        read_proc_file(43, "environ", 8, proc_root=tmp_path)


def test_read_proc_file_of_an_own_process() -> None:
    if not Path("/proc/self/environ").exists():
        pytest.skip("no /proc here")
    data = read_proc_file(os.getpid(), "environ", MAX_ENVIRON_BYTES)
    assert data.endswith(b"\0") or data == b""


# -- the identifier -------------------------------------------------------------------------------------------


def test_identify_array_task_keeps_kinetos_integer_as_alias() -> None:
    proc = FakeProc()
    proc.environ[5] = environ({"PATH": "/x", **ARRAY_TASK})
    ident = KinetoIdentifier(proc).identify(5, "36200")
    assert ident == KinetoIdentity("36199_0", ("36200",), "python train.py")


def test_identify_outside_slurm_and_plain_slurm_job() -> None:
    proc = FakeProc()
    proc.environ[5] = environ({"TORCHELASTIC_RUN_ID": "exp42"})
    proc.environ[6] = environ({"SLURM_JOB_ID": "77"})
    proc.environ[7] = environ({"HOME": "/root"})
    ident = KinetoIdentifier(proc)
    assert ident.identify(5, "0") == KinetoIdentity("exp42", ("0",), "python train.py")
    assert ident.identify(6, "77") == KinetoIdentity("77", (), "python train.py")  # the same id: no alias
    assert ident.identify(7, "0").job_id == "0"  # nothing in the environment: libkineto's


@pytest.mark.parametrize(
    "failure",
    [
        OSError(errno.EACCES, "Permission denied"),  # another user's process, no root / CAP_SYS_PTRACE
        OSError(errno.EPERM, "Operation not permitted"),
        OSError(errno.ENOENT, "No such file or directory"),  # exited, or no /proc (not Linux)
        OSError(errno.ESRCH, "No such process"),
    ],
)
def test_unreadable_environment_falls_back_to_kinetos_id(failure: OSError) -> None:
    proc = FakeProc()
    proc.environ[5] = failure
    assert KinetoIdentifier(proc).identify(5, "36200") == KinetoIdentity("36200", (), "python train.py")


def test_permission_denied_warns_once_not_per_process(caplog: pytest.LogCaptureFixture) -> None:
    proc = FakeProc()
    ident = KinetoIdentifier(proc)
    with caplog.at_level(logging.DEBUG, logger="dyno.daemon.tracing.kineto_identity"):
        for pid in range(10, 30):
            proc.environ[pid] = OSError(errno.EACCES, "Permission denied")
            ident.identify(pid, "0")
    (warning,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "CAP_SYS_PTRACE" in warning.getMessage()
    assert sum("CAP_SYS_PTRACE" in r.getMessage() for r in caplog.records) == 20  # the rest went to DEBUG


def test_environment_over_the_cap_is_not_searched() -> None:
    proc = FakeProc()
    proc.environ[5] = environ({"SLURM_ARRAY_JOB_ID": "1", "SLURM_ARRAY_TASK_ID": "2", "BIG": "x" * 100})
    assert KinetoIdentifier(proc, max_environ_bytes=64).identify(5, "9").job_id == "9"
    assert KinetoIdentifier(proc, max_environ_bytes=4096).identify(5, "9").job_id == "1_2"


@pytest.mark.parametrize(
    "value",
    ["j" * 129, "bad\tid", "line\nbreak", "bad\udcffbytes"],  # too long, unprintable, undecodable bytes
)
def test_environment_job_id_failing_the_request_rule_is_ignored(value: str) -> None:
    proc = FakeProc()
    proc.environ[5] = environ({"DYNO_JOB_ID": value, "SLURM_JOB_ID": "36200"})
    assert KinetoIdentifier(proc).identify(5, "36200") == KinetoIdentity("36200", (), "python train.py")


def test_malformed_environ_bytes_never_raise() -> None:
    proc = FakeProc()
    proc.environ[5] = b"\xff\xfe=\x00\x00==\0DYNO_JOB_ID\0SLURM_JOB_ID=\xc3\0"
    assert KinetoIdentifier(proc).identify(5, "0").job_id == "0"  # SLURM_JOB_ID undecodable: refused by the rule
    proc.environ[6] = b"\xff\xfe=\x00SLURM_JOB_ID=12\0"
    assert KinetoIdentifier(proc).identify(6, "12").job_id == "12"


# -- the manager: cache, matching, lock -----------------------------------------------------------------------


@pytest.fixture
def env(tmp_path: Path):  # type: ignore[no-untyped-def]
    clock = Clock()
    alive: set[int] = set()
    proc = FakeProc()
    reg = ProcessRegistry(silent_timeout_s=30, is_alive=lambda pid: pid in alive, clock_ms=clock)
    tm = TraceManager(reg, tmp_path / "traces", "hostA", clock_ms=clock, kineto_identifier=KinetoIdentifier(proc))
    proc.hook = tm.table.lock.locked
    return clock, alive, proc, reg, tm


def kpoll(pid: int, job: str = "36200", mask: int = 3, uid: int = 1000) -> KinetoPoll:
    return KinetoPoll(pid=pid, ancestry=(), job_id=job, type_mask=mask, uid=uid)


def test_environ_read_once_per_registration_and_never_under_the_lock(env) -> None:  # type: ignore[no-untyped-def]
    _clock, alive, proc, reg, tm = env
    alive.add(300)
    proc.environ[300] = environ(ARRAY_TASK)
    for _ in range(5):
        tm.kineto_poll(kpoll(300))
    rec = reg.get(300)
    assert (rec.job_id, rec.job_aliases, rec.cmdline) == ("36199_0", ("36200",), "python train.py")
    assert proc.environ_reads(300) == 1 and proc.reads.count((300, "cmdline")) == 1
    tm.start(TraceSpec(job_id="36199_0", duration_ms=100))
    tm.kineto_poll(kpoll(300))
    assert proc.environ_reads(300) == 1
    assert proc.during_read and not any(proc.during_read)  # the manager's lock was never held during a read


def test_request_matches_resolved_id_and_kinetos_integer(env) -> None:  # type: ignore[no-untyped-def]
    _clock, alive, proc, reg, tm = env
    alive.update({300, 301, 302})
    proc.environ[300] = environ(ARRAY_TASK)
    proc.environ[301] = environ({"SLURM_ARRAY_JOB_ID": "36199", "SLURM_ARRAY_TASK_ID": "1", "SLURM_JOB_ID": "36201"})
    proc.environ[302] = environ({"TORCHELASTIC_RUN_ID": "exp42"})
    tm.kineto_poll(kpoll(300))
    tm.kineto_poll(kpoll(301, job="36201"))
    tm.kineto_poll(kpoll(302, job="0"))
    assert reg.jobs() == ["36199_0", "36199_1", "exp42"]  # aliases are not jobs of their own
    assert [p.pid for p in reg.list("36199_0")] == [300]
    assert [p.pid for p in reg.list("36200")] == [300]  # `--job-id 36200` keeps working
    assert [p.pid for p in reg.list("0")] == [302]  # and so does `--job-id 0`
    for job, pid in (("36199_0", 300), ("36200", 300), ("exp42", 302), ("0", 302)):
        r = tm.start(TraceSpec(job_id=job, duration_ms=100, trace_id=f"t-{job}"))
        assert r.matched_pids == (pid,)
        assert r.triggered[0].job_id == reg.get(pid).job_id  # views carry the resolved id
        assert tm.kineto_poll(kpoll(pid, job=reg.get(pid).job_aliases[0]))  # handed over
        tm.cancel(r.trace_id)
    r = tm.start(TraceSpec(job_id="36199", duration_ms=100))
    assert r.matched_pids == () and "'36199_0'" in r.message and "'36200'" not in r.message


def test_reused_pid_is_read_again(env) -> None:  # type: ignore[no-untyped-def]
    _clock, alive, proc, reg, tm = env
    alive.add(300)
    proc.environ[300] = environ(ARRAY_TASK)
    tm.kineto_poll(kpoll(300))
    # The process exits; housekeeping drops it; a new process gets the same pid.
    alive.discard(300)
    tm.housekeeping()
    assert reg.get(300) is None
    alive.add(300)
    proc.environ[300] = environ({"TORCHELASTIC_RUN_ID": "next"})
    tm.kineto_poll(kpoll(300, job="0"))
    assert reg.get(300).job_id == "next" and proc.environ_reads(300) == 2
    # Reused before housekeeping noticed: another uid or another kineto id is another process too.
    proc.environ[300] = environ({"DYNO_JOB_ID": "third"})
    tm.kineto_poll(kpoll(300, job="0", uid=1001))
    assert reg.get(300).job_id == "third" and proc.environ_reads(300) == 3
    proc.environ[300] = environ({"DYNO_JOB_ID": "fourth"})
    tm.kineto_poll(kpoll(300, job="5", uid=1001))
    assert reg.get(300).job_id == "fourth" and proc.environ_reads(300) == 4


def test_agent_registration_of_the_pid_is_not_a_cache(env) -> None:  # type: ignore[no-untyped-def]
    _clock, alive, proc, reg, tm = env
    alive.add(300)
    reg.register(RegisteredProcess(pid=300, job_id="36200", protocol=PROTOCOL_AGENT, session_id="s"))
    proc.environ[300] = environ(ARRAY_TASK)
    tm.kineto_poll(kpoll(300))
    assert reg.get(300).protocol == PROTOCOL_KINETO and reg.get(300).job_id == "36199_0"


def test_unreadable_environment_registers_kinetos_id(env) -> None:  # type: ignore[no-untyped-def]
    _clock, alive, proc, reg, tm = env
    alive.add(300)
    proc.environ[300] = OSError(errno.EACCES, "Permission denied")
    tm.kineto_poll(kpoll(300))
    tm.kineto_poll(kpoll(300))
    rec = reg.get(300)
    assert (rec.job_id, rec.job_aliases) == ("36200", ()) and proc.environ_reads(300) == 1
    r = tm.start(TraceSpec(job_id="36200", duration_ms=100))
    assert r.matched_pids == (300,) and r.triggered[0].state == TraceState.PENDING


def test_context_count_uses_the_resolved_job(env) -> None:  # type: ignore[no-untyped-def]
    _clock, alive, proc, reg, tm = env
    alive.update({300, 301})
    proc.environ[300] = environ(ARRAY_TASK)
    proc.environ[301] = environ(ARRAY_TASK)
    tm.kineto_poll(kpoll(300))
    for pid in (302, 303):  # two contexts of the job on GPU 0 (kineto's own id would count none, answered as 1)
        reg.register(RegisteredProcess(pid=pid, job_id="36199_0", protocol=PROTOCOL_KINETO, gpu=0))
    assert tm.kineto_context_count(0, 300, "36200") == 2
    assert proc.environ_reads(301) == 0
    assert tm.kineto_context_count(0, 301, "36200") == 2  # unregistered: resolved from its environment
    assert proc.environ_reads(301) == 1

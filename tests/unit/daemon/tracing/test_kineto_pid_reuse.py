"""A pid reused by a new libkineto process of the same uid and kineto job id before housekeeping noticed the old
one's exit (~0.5 s) is another process: the identity cache is keyed on the process's start time (/proc/<pid>/stat),
so the new one's job id is read from its own environment, and the old one's trace fails as its process exited."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from manual_clock import Clock

from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.kineto_identity import KinetoIdentifier, read_proc_file
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import TraceSpec, TraceState

pytestmark = pytest.mark.unit


def stat_line(pid: int, start: int, comm: str = "python") -> bytes:
    # the fields of a real /proc/<pid>/stat up to starttime (22), then a few more
    rest = ["S", "1", str(pid), str(pid), "0", "-1", "4194560"] + ["0"] * 12 + [str(start), "12345", "678"]
    return f"{pid} ({comm}) ".encode() + " ".join(rest).encode() + b"\n"


class Proc:
    """One pid whose occupant can be swapped: (start time, environ)."""

    def __init__(self) -> None:
        self.start, self.environ = 0, b""

    def __call__(self, pid: int, name: str, limit: int) -> bytes:
        if name == "stat":
            return stat_line(pid, self.start)
        if name == "environ":
            return self.environ
        if name == "cmdline":
            return b"python\0train.py\0"
        raise OSError(errno.ENOENT, name)


def test_start_time_is_stat_field_22_whatever_the_command_name() -> None:
    for comm in ("python", "a) b (c", "x y"):
        ident = KinetoIdentifier(lambda pid, name, limit, comm=comm: stat_line(pid, 987654, comm))
        assert ident.start_time(42) == 987654
    assert KinetoIdentifier(lambda pid, name, limit: b"42 (python) S 1").start_time(42) == 0  # truncated
    assert KinetoIdentifier(lambda pid, name, limit: b"garbage").start_time(42) == 0


def test_start_time_of_real_processes_tells_them_apart() -> None:
    ident = KinetoIdentifier(read_proc_file)
    first = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        a = ident.start_time(first.pid)
        assert a > 0 and ident.start_time(first.pid) == a  # stable for one process
        assert 0 < ident.start_time(os.getpid()) <= a  # the test process started before its child
    finally:
        first.kill()
        first.wait()
    assert ident.start_time(first.pid) == 0  # gone


def test_reused_pid_with_same_uid_and_kineto_id_gets_its_own_job_id(tmp_path: Path) -> None:
    clock, proc = Clock(), Proc()
    reg = ProcessRegistry(is_alive=lambda pid: True, clock_ms=clock)
    tm = TraceManager(reg, tmp_path / "traces", "hostA", clock_ms=clock, kineto_identifier=KinetoIdentifier(proc))
    poll = KinetoPoll(pid=300, ancestry=(), job_id="0", type_mask=3, uid=1000)
    proc.start, proc.environ = 1000, b"DYNO_JOB_ID=old\0"
    tm.kineto_poll(poll)
    r = tm.start(TraceSpec(job_id="old", duration_ms=100, trace_id="t-old"))
    assert tm.kineto_poll(poll)  # the old process took the config
    assert reg.get(300).busy

    # It exits; within housekeeping's ~0.5 s, a new process of the same user (kineto id 0 too) gets pid 300.
    proc.start, proc.environ = 2000, b"DYNO_JOB_ID=new\0"
    tm.kineto_poll(poll)

    rec = reg.get(300)
    assert (rec.job_id, rec.start_time, rec.busy) == ("new", 2000, False)
    (old,) = tm.get(r.trace_id).processes
    assert old.state == TraceState.FAILED
    assert old.error == "process exited (its pid was reused) before the trace finished"
    assert [p.pid for p in reg.list("new")] == [300] and reg.list("old") == []
    tm.kineto_poll(poll)  # the same new process polling again: the cache holds
    assert reg.get(300).job_id == "new"

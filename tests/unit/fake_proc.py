"""A /proc with no processes, for trace-manager tests: their made-up pids (300, 4242...) may be real processes on
the machine running the tests, whose environment (a DYNO_JOB_ID, a Slurm job) must not change their job ids."""

from __future__ import annotations

from dyno.daemon.kineto_identity import KinetoIdentifier


def no_proc(pid: int, name: str, limit: int) -> bytes:
    raise FileNotFoundError(f"/proc/{pid}/{name}")


def no_proc_identifier() -> KinetoIdentifier:
    return KinetoIdentifier(no_proc)

"""A /proc with no processes, for trace-manager tests: their made-up pids (300, 4242...) may be real processes on
the machine running the tests, whose environment (a DYNO_JOB_ID, a Slurm job) must not change their job ids."""

from __future__ import annotations

from dyno.daemon.kineto_identity import KinetoIdentifier


def no_proc(pid: int, name: str, limit: int) -> bytes:
    raise FileNotFoundError(f"/proc/{pid}/{name}")


def no_proc_identifier() -> KinetoIdentifier:
    return KinetoIdentifier(no_proc)


class ProcTable:
    """A fake /proc of a few processes: pid -> (comm, cmdline as the kernel shows it: NUL-terminated words); no
    environ (job ids stay libkineto's) and no stat (start times unknown). Counts reads per (pid, file name)."""

    def __init__(self, procs: dict[int, tuple[str, bytes]]) -> None:
        self.procs = procs
        self.reads: list[tuple[int, str]] = []

    def __call__(self, pid: int, name: str, limit: int) -> bytes:
        self.reads.append((pid, name))
        if pid not in self.procs or name not in ("comm", "cmdline"):
            raise FileNotFoundError(f"/proc/{pid}/{name}")
        comm, cmdline = self.procs[pid]
        return (comm.encode() + b"\n" if name == "comm" else cmdline)[: limit + 1]

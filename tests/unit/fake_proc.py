"""A /proc with no processes, for trace-manager tests: their made-up pids (300, 4242...) may be real processes on
the machine running the tests, whose environment (a DYNO_JOB_ID, a Slurm job) must not change their job ids."""

from __future__ import annotations

from pathlib import Path

from manual_clock import Clock

from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.kineto_identity import KinetoIdentifier
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.table import DEFAULT_LIMITS, TraceLimits


def no_proc(pid: int, name: str, limit: int) -> bytes:
    raise FileNotFoundError(f"/proc/{pid}/{name}")


def no_proc_identifier() -> KinetoIdentifier:
    return KinetoIdentifier(no_proc)


def host_a_manager(
    reg: ProcessRegistry, trace_dir: Path, clock: Clock, limits: TraceLimits = DEFAULT_LIMITS
) -> TraceManager:
    """The TraceManager of host "hostA" on `clock` that reads no /proc."""
    return TraceManager(reg, trace_dir, "hostA", limits=limits, clock_ms=clock, kineto_identifier=no_proc_identifier())


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


def kineto_manager(tmp_path: Path, proc: ProcTable, polls: list[KinetoPoll]) -> TraceManager:
    """A TraceManager on a manual clock whose kineto processes are `polls`, their /proc being `proc`."""
    clock = Clock()
    reg = ProcessRegistry(is_alive=lambda pid: True, clock_ms=clock)
    tm = TraceManager(reg, tmp_path / "traces", "hostA", clock_ms=clock, kineto_identifier=KinetoIdentifier(proc))
    for p in polls:
        tm.kineto_poll(p)
    return tm

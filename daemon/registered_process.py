"""A process registered with this daemon: which protocol it speaks, and the record the registry keeps on it.

A frozen value: the registry (dyno.daemon.registry) replaces a record to change it, so a record handed out is never
changed under its reader.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROTOCOL_AGENT", "PROTOCOL_KINETO", "PROTOCOLS", "RegisteredProcess"]

PROTOCOL_AGENT = "agent"
PROTOCOL_KINETO = "kineto"
PROTOCOLS = (PROTOCOL_AGENT, PROTOCOL_KINETO)


@dataclass(frozen=True)
class RegisteredProcess:
    """One process registered with this daemon: its identity, and what the trace manager keeps on it."""

    pid: int
    job_id: str
    protocol: str  # PROTOCOL_AGENT | PROTOCOL_KINETO
    ancestry: tuple[int, ...] = ()  # parent first
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    gpu: int = -1
    registered_ms: int = 0
    last_seen_ms: int = 0
    busy: bool = False
    current_trace_id: str = ""
    cmdline: str = ""
    hostname: str = ""
    session_id: str = ""  # agent: the Register session (a secret of its agent); "" for kineto
    # agent: it sends its session in ReportTrace; a report of an agent that registered without this flag is believed
    # without a session
    reports_with_session: bool = False
    connected: bool = False  # agent: a Watch stream is open (liveness comes from the stream, not polls)
    uid: int = -1  # kineto: kernel-reported uid of the sender; agent: owner of /proc/<pid>; -1: unknown
    # Other job ids it answers to: kineto's decimal integer when its environment named another (kineto_identity.py)
    job_aliases: tuple[str, ...] = ()
    # kineto: the process's start time (/proc/<pid>/stat), which tells it from a later process reusing its pid; 0:
    # unknown
    start_time: int = 0
    # kineto: the torch launcher it runs ("torchrun", "torch.distributed.run"...; kineto_identity.py), "" for any other
    # program; such a process only starts workers and waits, and is never traced (the agent never registers one)
    launcher: str = ""

    def same_process(self, start_time: int) -> bool:
        """False when both start times are known and differ: the pid now belongs to another process."""
        return not (self.start_time and start_time and self.start_time != start_time)

    def answers_to(self, job_id: str) -> bool:
        """Whether a request for this job id matches it: its own id or an alias."""
        return job_id == self.job_id or job_id in self.job_aliases

    @property
    def job_ids(self) -> tuple[str, ...]:
        """Every job id a request may name it by: its own and its aliases."""
        return (self.job_id, *self.job_aliases)

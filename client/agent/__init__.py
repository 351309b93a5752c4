"""The dyno trainer agent: registers this process with the local dynod and takes torch.profiler traces on request.

    from dyno.client import agent
    agent.start()                      # job id etc. from the environment; returns at once

or, with no code change, `dyno-run -- python train.py` (see dyno.client.run). The agent connects to the daemon's
Agent service on a Unix socket (DYNO_AGENT_SOCKET, else the default of a dynod of this user or the system dynod's,
whichever listens), registers, and keeps a Watch stream open through which trace requests arrive as they are made.
Everything runs in two daemon threads: one holds the connection (reconnecting with backoff and registering again
after a daemon restart), one runs traces. No exception ever reaches the trainer; a missing daemon is logged once as
a warning, then at debug level.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import Any

from dyno.client.agent.env import resolve_identity
from dyno.client.agent.process_agent import EXIT_FINISH_S, Agent, explicit_args

__all__ = ["Agent", "EXIT_FINISH_S", "start", "stop", "current"]

log = logging.getLogger(__name__)


_agent: Agent | None = None
_agent_lock = threading.Lock()


def _forget_in_child() -> None:
    # fork() copies this module's state but not the agent's threads: the child starts without an agent.
    global _agent
    _agent = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def start(
    job_id: str | None = None,
    socket_path: str | os.PathLike[str] | None = None,
    *,
    rank: int | None = None,
    local_rank: int | None = None,
    world_size: int | None = None,
    wait_for_torch: bool = False,
    max_backoff_s: float = 5.0,
) -> Agent:
    """Start this process's agent (idempotent: a running agent is returned as is). Returns at once; connecting
    and registering happen in the background. job_id defaults to DYNO_JOB_ID / SLURM ids / TORCHELASTIC_RUN_ID,
    rank info to RANK / LOCAL_RANK / WORLD_SIZE, socket_path to DYNO_AGENT_SOCKET, else whichever of the default
    socket of a dynod of this user and the system dynod's (/run/dyno/agent.sock) listens (env.socket_candidates).
    wait_for_torch: register only once the process has imported torch (used by dyno-run's bootstrap)."""
    global _agent
    with _agent_lock:
        if _agent is not None:
            _say_ignored(_agent, explicit_args(job_id, socket_path, rank, local_rank, world_size))
            return _agent
        agent = Agent(
            job_id,
            socket_path,
            rank=rank,
            local_rank=local_rank,
            world_size=world_size,
            wait_for_torch=wait_for_torch,
            max_backoff_s=max_backoff_s,
        )
        _agent = agent.start()
        atexit.register(agent.stop, 1.0)
        return agent


def _say_ignored(running: Agent, asked: dict[str, Any]) -> None:
    """A second start() returns the running agent as is (its registration cannot change under it): say which of its
    explicit arguments that leaves unused, so a job id given to a later start() is not dropped silently."""
    now = running.started_with  # what the running agent registers with: its arguments, else the environment
    ident = resolve_identity(
        now["job_id"], rank=now["rank"], local_rank=now["local_rank"], world_size=now["world_size"]
    )
    effective = {
        "job_id": ident.job_id,
        "socket_path": now["socket_path"] or os.environ.get("DYNO_AGENT_SOCKET"),
        "rank": ident.rank,
        "local_rank": ident.local_rank,
        "world_size": ident.world_size,
    }
    ignored = {k: v for k, v in asked.items() if v is not None and v != effective[k]}
    if ignored:
        log.warning(
            "dyno agent: already started (by dyno-run's bootstrap or an earlier agent.start()); %s ignored: give them"
            " to the first start(), to dyno-run --job-id / --socket, or in the environment (DYNO_JOB_ID, "
            "DYNO_AGENT_SOCKET, RANK, LOCAL_RANK, WORLD_SIZE)",
            ", ".join(f"{k}={v!r}" for k, v in ignored.items()),
        )


def stop(timeout_s: float = 2.0) -> None:
    """Stop this process's agent, if any."""
    global _agent
    with _agent_lock:
        agent, _agent = _agent, None
    if agent is not None:
        agent.stop(timeout_s)


def current() -> Agent | None:
    """This process's running agent, or None."""
    return _agent

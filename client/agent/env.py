"""Who this trainer process is, from its environment: job id, rank info, GPU, ancestry, and where its daemon is.

Pure functions over an injected environment mapping, so tests need neither torch nor a daemon.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dyno import default_paths
from dyno.default_paths import accepts_connection  # re-exported: the agent's own callers ask this module
from dyno.job_ids import job_id_from_env
from dyno.python_argv import torch_launcher  # re-exported: the bootstrap asks this module (it loads it anyway)

__all__ = [
    "ENV_SOCKET",
    "AgentIdentity",
    "resolve_job_id",
    "SYSTEM_AGENT_SOCKET",
    "socket_candidates",
    "socket_named",
    "accepts_connection",
    "pick_socket",
    "resolve_socket_path",
    "resolve_identity",
    "ancestry",
    "MP_CHILD_FLAG",
    "multiprocessing_role",
    "torch_launcher",
    "pid_namespace",
]

ENV_SOCKET = "DYNO_AGENT_SOCKET"
# The agent socket of a dynod run by root, e.g. the systemd unit: tried after the trainer's own user's default, so
# that a trainer of an ordinary user finds the system daemon too.
SYSTEM_AGENT_SOCKET = default_paths.SYSTEM_AGENT_SOCKET
_MAX_CMDLINE = 1024
MP_CHILD_FLAG = "--multiprocessing-fork"  # on the command line of every multiprocessing spawn child
# Non-daemonic multiprocessing children that are still helpers: ProcessPoolExecutor workers (not daemonic since
# Python 3.9) run this module's function.
_POOL_WORKER_MODULES = ("concurrent.futures.process",)


@dataclass(frozen=True)
class AgentIdentity:
    """What the agent registers with: everything the daemon matches trace requests against."""

    pid: int
    ancestry: tuple[int, ...]
    job_id: str
    rank: int | None
    local_rank: int | None
    world_size: int | None
    gpu: int  # -1 when unknown
    hostname: str
    cmdline: str


def _env_int(env: Mapping[str, str], name: str) -> int | None:
    text = env.get(name, "").strip()
    try:
        return int(text) if text else None
    except ValueError:
        return None


def resolve_job_id(explicit: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The argument, else dyno.job_ids.job_id_from_env (DYNO_JOB_ID, Slurm ids, TORCHELASTIC_RUN_ID): the rule the
    daemon applies to a kineto trainer's environment too; "" when none is known."""
    if explicit:
        return str(explicit)
    return job_id_from_env(os.environ if env is None else env)


def _user_default_socket() -> Path:
    return default_paths.default_agent_socket()


def socket_candidates(
    explicit: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> tuple[Path, ...]:
    """Where the daemon's Agent socket may be: the argument, else DYNO_AGENT_SOCKET, alone when given; else the
    default of a dynod run by this process's own user (dyno.default_paths: /run/dyno for root, else
    $XDG_RUNTIME_DIR/dyno or the state dir), then the system dynod's (SYSTEM_AGENT_SOCKET, the systemd unit's),
    each once."""
    env = os.environ if env is None else env
    if explicit:
        return (Path(explicit),)
    if env.get(ENV_SOCKET, "").strip():
        return (Path(env[ENV_SOCKET].strip()),)
    own = _user_default_socket()
    return (own,) if own == SYSTEM_AGENT_SOCKET else (own, SYSTEM_AGENT_SOCKET)


def socket_named(explicit: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> bool:
    """Whether the Agent socket was named (the argument or DYNO_AGENT_SOCKET) rather than taken from the defaults."""
    env = os.environ if env is None else env
    return bool(explicit) or bool(env.get(ENV_SOCKET, "").strip())


def pick_socket(candidates: Sequence[Path], listening: Callable[[Path], bool] = accepts_connection) -> Path:
    """Of the candidate socket paths (in order of preference): the first something listens on, else the first that
    exists (a daemon that is restarting), else the first. A single candidate is returned as is, unprobed."""
    if len(candidates) == 1:
        return candidates[0]
    for path in candidates:
        if listening(path):
            return path
    return next((path for path in candidates if path.exists()), candidates[0])


def resolve_socket_path(explicit: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The daemon's Agent socket for now: pick_socket(socket_candidates(explicit, env))."""
    return pick_socket(socket_candidates(explicit, env))


def pid_namespace(proc: str = "/proc") -> str:
    """This process's pid namespace: the inode number of /proc/self/ns/pid as text, "" when unknown. A trainer in a
    container (its own pid namespace) has pids that mean other processes to a daemon on the host (its pid 1 is the
    host's init there): the daemon compares this with its own and refuses such a registration."""
    try:
        return str(os.stat(f"{proc}/self/ns/pid").st_ino)
    except OSError:
        return ""


def _gpu(env: Mapping[str, str]) -> int:
    # Only an unambiguous answer: exactly one visible device named by index. Asking torch.cuda from the agent
    # thread could initialise CUDA in a process that never meant to.
    visible = [d.strip() for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if len(visible) == 1 and visible[0].isdigit():
        return int(visible[0])
    return -1


def ancestry(pid: int | None = None) -> tuple[int, ...]:
    """Parent pids from the direct parent up to (not including) pid 0; empty when unreadable."""
    try:
        import psutil

        return tuple(p.pid for p in psutil.Process(pid).parents())
    except Exception:  # psutil missing or the process gone: ancestry is a hint, never a reason to fail
        return (os.getppid(),) if pid is None else ()


def resolve_identity(
    job_id: str | None = None,
    *,
    rank: int | None = None,
    local_rank: int | None = None,
    world_size: int | None = None,
    env: Mapping[str, str] | None = None,
) -> AgentIdentity:
    """This process's identity: explicit arguments over the torch.distributed variables RANK / LOCAL_RANK /
    WORLD_SIZE over unknown."""
    env = os.environ if env is None else env
    return AgentIdentity(
        pid=os.getpid(),
        ancestry=ancestry(),
        job_id=resolve_job_id(job_id, env),
        rank=rank if rank is not None else _env_int(env, "RANK"),
        local_rank=local_rank if local_rank is not None else _env_int(env, "LOCAL_RANK"),
        world_size=world_size if world_size is not None else _env_int(env, "WORLD_SIZE"),
        gpu=_gpu(env),
        hostname=socket.gethostname(),
        cmdline=" ".join(_command_line())[:_MAX_CMDLINE],
    )


def _command_line() -> list[str]:
    argv = getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv]
    if MP_CHILD_FLAG not in argv:
        return list(argv)
    # A spawn child's own command line is multiprocessing's bootstrap, the same for every child; its sys.argv is
    # its parent's (set by multiprocessing), which names the program, and the process name tells children apart.
    mp = sys.modules.get("multiprocessing")
    name = mp.current_process().name if mp is not None else "multiprocessing child"
    return [argv[0], *sys.argv, f"[{name}]"]


def multiprocessing_role(argv: Sequence[str], mp: Any | None) -> Literal["process", "pending", "helper"]:
    """Whether a process started with `argv` may register, given the `multiprocessing` module (None when not
    imported). A multiprocessing spawn child is either a trainer (torch.multiprocessing.spawn's workers, a DDP
    script's own Process per rank: non-daemonic) or a helper (DataLoader workers: daemonic; ProcessPoolExecutor
    workers), and which one is known only once it runs its target: until then (it is unpickling the target and
    importing torch on the way) it is "pending". Every other process is a "process" and may register."""
    if MP_CHILD_FLAG not in argv:
        return "process"
    if mp is None or mp.parent_process() is None:  # set by Process._bootstrap, right before the target runs
        return "pending"
    current = mp.current_process()
    target = getattr(getattr(current, "_target", None), "__module__", "")
    return "helper" if current.daemon or target in _POOL_WORKER_MODULES else "process"

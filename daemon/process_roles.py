"""What each registered process of a job is: a trainer, a launcher (starts trainers and waits for them) or a
DataLoader worker (a trainer's helper). One rule for `--process-limit` (leaf trainers first) and for the ROLE column
of `dyno-cli ps`, so that what ps shows is what a trace request does.

- a recognised torch launcher (`RegisteredProcess.launcher`: `torchrun`, `python -m torch.distributed.run`, read from a
  kineto sender's command line) is a launcher; the trace manager never traces one;
- a process whose kernel task name is `pt_data_worker` (dyno.daemon.tracing.kineto_identity.DATA_WORKER_NAMES: read from
  /proc by the caller, it changes once the worker's loop starts) is a DataLoader worker, and makes no launcher of
  the trainer it serves;
- a process whose pid is in another process's ancestry (among the processes considered together: one request's
  matches, or one job's processes) is a launcher, e.g. a `torch.multiprocessing.spawn` parent;
- any other is a trainer.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping

from dyno.daemon.registered_process import RegisteredProcess

__all__ = [
    "ROLE_TRAINER",
    "ROLE_LAUNCHER",
    "ROLE_DATALOADER",
    "ROLES",
    "process_roles",
    "job_roles",
    "order_for_limit",
]

ROLE_TRAINER = "trainer"
ROLE_LAUNCHER = "launcher"
ROLE_DATALOADER = "dataloader"
ROLES = (ROLE_TRAINER, ROLE_LAUNCHER, ROLE_DATALOADER)  # the order --process-limit takes them in
_RANK = {role: i for i, role in enumerate(ROLES)}


def process_roles(procs: Iterable[RegisteredProcess], data_workers: Collection[int] = ()) -> dict[int, str]:
    """pid -> role of each of `procs`, considered together (see the module's doc); `data_workers`: the pids of
    DataLoader workers among them."""
    procs = list(procs)
    # A worker's ancestry holds its trainer, which stays a trainer; a launcher's holds whatever started it.
    ancestors = {a for p in procs if p.pid not in data_workers for a in p.ancestry}
    roles = {}
    for p in procs:
        if p.launcher:
            roles[p.pid] = ROLE_LAUNCHER
        elif p.pid in data_workers:
            roles[p.pid] = ROLE_DATALOADER
        else:
            roles[p.pid] = ROLE_LAUNCHER if p.pid in ancestors else ROLE_TRAINER
    return roles


def job_roles(procs: Iterable[RegisteredProcess], data_workers: Collection[int] = ()) -> dict[int, str]:
    """process_roles within each job of `procs` (a process of one job never makes a launcher of another job's): the
    roles a job-wide trace request of each job sees, whichever processes are listed together."""
    jobs: defaultdict[str, list[RegisteredProcess]] = defaultdict(list)
    for p in procs:
        jobs[p.job_id].append(p)
    return {pid: role for job in jobs.values() for pid, role in process_roles(job, data_workers).items()}


def order_for_limit(procs: list[RegisteredProcess], data_workers: Collection[int] = ()) -> list[RegisteredProcess]:
    """Trainers first (by rank, then pid), then launchers, then DataLoader workers: the order `process_limit`
    takes matched processes in."""
    roles: Mapping[int, str] = process_roles(procs, data_workers)
    return sorted(procs, key=lambda p: (_RANK[roles[p.pid]], p.rank if p.rank is not None else 1 << 30, p.pid))

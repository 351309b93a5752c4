"""Which users' processes each registered job id holds, and the rule that keeps one user's process out of another
user's job: a trace of a job traces every process registered under its id, so a process joining a job of someone
else's would be traced with it, its file in that trace (and, on a libkineto process, the job's trace config).

A process of user U may join job J when J has no registered process of a known user, or has one of U's; otherwise
(J's processes are all other users') only when U is an admin (root, dynod's user, the admin group:
dyno.daemon.callers). The ids that name no job, "" (an agent given none) and libkineto's "0" (a trainer outside
Slurm), are everyone's. Plain and not thread-safe: the registry keeps it under its lock.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["SHARED_JOB_IDS", "JobConflict", "JobOfAnotherUserError", "JobUsers"]

SHARED_JOB_IDS = frozenset({"", "0"})


@dataclass(frozen=True)
class JobConflict:
    """Job `job_id` holds registered processes only of `others` (uids), none of the joining process's user."""

    job_id: str
    others: tuple[int, ...]


class JobOfAnotherUserError(Exception):
    """A process refused a job whose registered processes are another user's (PERMISSION_DENIED,
    JOB_OF_ANOTHER_USER); the message says whose and what to do."""

    def __init__(self, pid: int, uid: int, conflict: JobConflict) -> None:
        users = ", ".join(f"uid {u}" for u in conflict.others)
        super().__init__(
            f"job {conflict.job_id!r} has registered processes of another user ({users}): process {pid} of uid "
            f"{uid} may not join it (only root or dynod's admin group may); give the trainer a job id of its own "
            "(DYNO_JOB_ID, or dyno-run --job-id)"
        )
        self.conflict = conflict


class JobUsers:
    """job id -> how many registered processes of each uid answer to it (their job id and aliases)."""

    def __init__(self) -> None:
        self._by_job: dict[str, collections.Counter[int]] = {}

    def add(self, job_ids: Iterable[str], uid: int) -> None:
        for job in set(job_ids) - SHARED_JOB_IDS:
            self._by_job.setdefault(job, collections.Counter())[uid] += 1

    def remove(self, job_ids: Iterable[str], uid: int) -> None:
        for job in set(job_ids) - SHARED_JOB_IDS:
            users = self._by_job.get(job)
            if users is None:
                continue
            users[uid] -= 1
            if users[uid] <= 0:
                del users[uid]
            if not users:
                del self._by_job[job]

    def conflict(self, job_ids: Iterable[str], uid: int) -> JobConflict | None:
        """The first of `job_ids` whose registered processes of known users are all another user's, for a process of
        `uid` that is not registered under it yet (None: it may join them all; a process of unknown uid is not
        checked, as nothing can be said of it)."""
        if uid < 0:
            return None
        for job in sorted(set(job_ids) - SHARED_JOB_IDS):
            users = self._by_job.get(job)
            if not users or users.get(uid, 0) > 0:
                continue
            others = tuple(sorted(u for u in users if u >= 0))
            if others:
                return JobConflict(job, others)
        return None

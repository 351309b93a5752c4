"""Which job a process belongs to, and whose it is.

A registered trainer's job id comes first (the agent or libkineto told the daemon); a child of one (a DataLoader
worker) counts for its job. Any other process holding a GPU is asked itself: its environment (DYNO_JOB_ID, Slurm's
job or array task, TORCHELASTIC_RUN_ID), then its cgroup path (Slurm's job_<id>, a Kubernetes pod uid); else it is
`unattributed`. The owner is always named. What /proc says of a pid does not change while the process lives, so it
is read once per process (a pid, and its start time whenever the caller reads it).
"""

from __future__ import annotations

import enum
import os
import pwd
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "UNATTRIBUTED",
    "MAX_JOB_ID_LEN",
    "Source",
    "JobIdentity",
    "ProcReader",
    "Attributor",
    "job_from_environ",
    "job_from_cgroup",
]

UNATTRIBUTED = "unattributed"
MAX_JOB_ID_LEN = 128  # a process's environment is anyone's to set: ids are cut, never trusted to be short
_MAX_ANCESTORS = 8  # trainer -> DataLoader worker -> its helpers; deeper is someone else's process tree
_MAX_CACHED = 16384
_SLURM_JOB = re.compile(r"/job_(\d+)(?:/|$)")
_K8S_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")


class Source(enum.Enum):
    """Where a process's job id came from."""

    REGISTERED = "registered"
    ENVIRON = "environ"
    CGROUP = "cgroup"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class JobIdentity:
    job_id: str
    user: str
    source: Source
    trainer_pid: int = 0  # the registered trainer it counts for (itself, or its parent), 0: none


def _clean(job_id: str) -> str:
    return "".join(c for c in job_id if c.isprintable())[:MAX_JOB_ID_LEN]


def job_from_environ(env: Mapping[str, str]) -> str | None:
    """The job id a process's environment names: DYNO_JOB_ID, then Slurm's array task ("<array job>_<task>") or
    job, then torchelastic's run id; None when it names none."""
    if env.get("DYNO_JOB_ID"):
        return _clean(env["DYNO_JOB_ID"])
    array_job, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    if array_job and task:
        return _clean(f"{array_job}_{task}")
    if env.get("SLURM_JOB_ID"):
        return _clean(env["SLURM_JOB_ID"])
    if env.get("TORCHELASTIC_RUN_ID"):
        return _clean(env["TORCHELASTIC_RUN_ID"])
    return None


def job_from_cgroup(text: str) -> str | None:
    """The job id in a /proc/<pid>/cgroup text: Slurm's job_<id> (cgroup v1 or v2), else a Kubernetes pod uid as
    "k8s-pod-<uid>"; None when neither is there."""
    m = _SLURM_JOB.search(text)
    if m:
        return m.group(1)
    m = _K8S_POD.search(text)
    if m:
        return "k8s-pod-" + m.group(1).replace("_", "-")
    return None


class ProcReader:
    """What job accounting reads of a process under a /proc root (injectable: tests point it at a fake tree)."""

    def __init__(self, root: Path = Path("/proc")) -> None:
        self.root = root
        self._prefix = str(root) + "/"  # plain strings and os.open: pathlib's parsing cost more than the reads
        try:
            self.ticks_per_s = float(os.sysconf("SC_CLK_TCK"))
        except (ValueError, OSError):
            self.ticks_per_s = 100.0

    def _read(self, pid: int, name: str) -> bytes | None:
        try:
            fd = os.open(f"{self._prefix}{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
        except (OSError, ValueError):
            return None
        try:
            chunks = []
            size = 0
            while size < 1 << 20:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            return b"".join(chunks)
        except OSError:
            return None
        finally:
            os.close(fd)

    def environ(self, pid: int) -> dict[str, str]:
        raw = self._read(pid, "environ") or b""
        env: dict[str, str] = {}
        for item in raw.split(b"\0"):
            key, sep, value = item.partition(b"=")
            if sep:
                env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
        return env

    def cgroup(self, pid: int) -> str:
        return (self._read(pid, "cgroup") or b"").decode("utf-8", "replace")

    def stat(self, pid: int) -> tuple[int, int, float] | None:
        """(ppid, start time in ticks, CPU seconds used) from /proc/<pid>/stat; None when the process is gone."""
        # one read: the kernel writes the whole line (under 1 KiB) at once; a second read only to see the end of
        # the file took a fifth of the read's time (the most frequent of accounting's reads)
        try:
            fd = os.open(f"{self._prefix}{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except (OSError, ValueError):
            return None
        try:
            raw = os.read(fd, 4096)
        except OSError:
            return None
        finally:
            os.close(fd)
        fields = raw.rsplit(b")", 1)[-1].split()
        try:
            # after the command: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
            # cutime cstime priority nice threads itrealvalue starttime
            ppid, utime, stime, start = int(fields[1]), int(fields[11]), int(fields[12]), int(fields[19])
        except (IndexError, ValueError):
            return None
        return ppid, start, (utime + stime) / self.ticks_per_s

    def uid(self, pid: int) -> int:
        try:
            return (self.root / str(pid)).stat().st_uid
        except (OSError, ValueError):
            return -1

    def children(self, pid: int) -> list[int]:
        """The children of a process's main thread (/proc/<pid>/task/<pid>/children; empty where the kernel lacks
        it): a trainer's DataLoader workers are forked by the thread that iterates the loader, its main one."""
        raw = self._read(pid, f"task/{pid}/children") or b""
        return [int(p) for p in raw.split() if p.isdigit()]


def user_name(uid: int) -> str:
    """The login name of a uid (its number when it has none)."""
    if uid < 0:
        return "unknown"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


class Attributor:
    """pid -> JobIdentity, given the registered trainers of this tick ({pid: (job id, uid)})."""

    def __init__(self, proc: ProcReader) -> None:
        self._proc = proc
        self._cache: dict[int, tuple[int, JobIdentity]] = {}  # pid -> (its start time, identity)
        self._users: dict[int, str] = {}  # every tick names every process's owner: getpwuid reads /etc/passwd
        self._registered: dict[tuple[str, int, int], JobIdentity] = {}  # (job id, uid, pid) of registered ones

    def _user(self, uid: int) -> str:
        name = self._users.get(uid)
        if name is None:
            if len(self._users) >= _MAX_CACHED:
                self._users.clear()
            name = self._users[uid] = user_name(uid)
        return name

    def resolve(
        self, pid: int, registered: Mapping[int, tuple[str, int]], stat: tuple[int, int, float] | None = None
    ) -> JobIdentity:
        """`stat`: ProcReader.stat(pid) when the caller has just read it (a pid reused by another process, a new
        start time, is resolved again); None: what is known of the pid stands."""
        found = registered.get(pid)
        if found is not None:
            reg_key = (found[0], found[1], pid)
            known = self._registered.get(reg_key)
            if known is None:
                if len(self._registered) >= _MAX_CACHED:
                    self._registered.clear()
                known = JobIdentity(_clean(found[0]) or UNATTRIBUTED, self._user(found[1]), Source.REGISTERED, pid)
                self._registered[reg_key] = known
            return known
        cached = self._cache.get(pid)
        if cached is not None and (stat is None or cached[0] == stat[1]):
            ident = cached[1]
            if ident.trainer_pid == 0 or ident.trainer_pid in registered:
                return ident
        if stat is None:
            stat = self._proc.stat(pid)
        ident = self._resolve_unregistered(pid, stat, registered)
        if len(self._cache) >= _MAX_CACHED:
            self._cache.clear()
        self._cache[pid] = (stat[1] if stat is not None else 0, ident)
        return ident

    def _resolve_unregistered(
        self, pid: int, stat: tuple[int, int, float] | None, registered: Mapping[int, tuple[str, int]]
    ) -> JobIdentity:
        user = self._user(self._proc.uid(pid))
        parent = stat[0] if stat is not None else 0
        for _ in range(_MAX_ANCESTORS):
            if parent <= 1:
                break
            if parent in registered:
                job_id, _uid = registered[parent]
                return JobIdentity(_clean(job_id) or UNATTRIBUTED, user, Source.REGISTERED, parent)
            up = self._proc.stat(parent)
            parent = up[0] if up is not None else 0
        job = job_from_environ(self._proc.environ(pid))
        if job:
            return JobIdentity(job, user, Source.ENVIRON)
        job = job_from_cgroup(self._proc.cgroup(pid))
        if job:
            return JobIdentity(job, user, Source.CGROUP)
        return JobIdentity(UNATTRIBUTED, user, Source.NONE)

    def forget(self, live_pids: set[int]) -> None:
        """Drop what is cached of pids no longer seen."""
        for pid in [p for p in self._cache if p not in live_pids]:
            del self._cache[pid]
        for reg in [k for k in self._registered if k[2] not in live_pids]:
            del self._registered[reg]

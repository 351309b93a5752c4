"""Who a local libkineto sender is, from /proc: its command line, whether it is torch's launcher, and its job id and
rank (RANK, LOCAL_RANK, WORLD_SIZE), which libkineto does not send.

libkineto sends `$SLURM_JOB_ID` as an int64, else 0. So a trainer outside Slurm registers as job "0", and a Slurm
array task as its raw SLURM_JOB_ID, while dyno's agent registers the same job as "<array job>_<task>". The daemon
therefore reads the sender's /proc/<pid>/environ once, when the pid first registers, and applies the agent's own
rule (dyno.job_ids.job_id_from_env). Kineto's decimal id stays an alias the process also answers to, so requests
naming it keep matching. Any failure (another user's process without root or CAP_SYS_PTRACE, the process gone, an
environment over the size cap, an id the request rule refuses, no /proc) means "unknown": kineto's id, as before.

libkineto registers every process that imports torch, torch's launcher (`torchrun`, `python -m
torch.distributed.run`) included, which only starts the workers and waits: its command line, read as the agent's
bootstrap reads its own (dyno.python_argv.torch_launcher), tells it apart, and the trace manager never traces it.

Reads run in the kineto IPC thread before the trace manager takes its lock; the reader is injected for tests.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dyno.job_ids import JOB_ID_VARIABLES, job_id_from_env
from dyno.logthrottle import ThrottledLog
from dyno.python_argv import torch_launcher
from dyno.request_limits import JOB_ID_RULE, job_id_ok

__all__ = [
    "MAX_ENVIRON_BYTES",
    "MAX_CMDLINE_BYTES",
    "MAX_STAT_BYTES",
    "RANK_VARIABLES",
    "DATA_WORKER_NAMES",
    "ProcFileReader",
    "KinetoIdentity",
    "KinetoIdentifier",
    "read_proc_file",
    "parse_environ",
]

log = logging.getLogger(__name__)

MAX_ENVIRON_BYTES = 1 << 20  # the kernel allows far larger environments; a job id never needs them
MAX_CMDLINE_BYTES = 4096
MAX_STAT_BYTES = 4096
_STARTTIME_AFTER_COMM = 19  # stat field 22 (starttime) is the 20th after the command name (field 2)
_MAX_COMM_BYTES = 64  # the kernel's task name is at most 15 bytes and a newline
# The names torch gives a DataLoader worker's main thread (torch/utils/data/_utils/worker.py `_worker_loop`:
# `_set_thread_name("pt_data_worker")`, torch >= 2.2), so the kernel's /proc/<pid>/comm of the worker process. A
# spawn-started worker's command line is multiprocessing's (`python -c from multiprocessing.spawn import
# spawn_main; ... --multiprocessing-fork`), exactly that of a torch.multiprocessing.spawn trainer: only this name
# tells a helper from a trainer (checked with torch 2.13: trainer "python", worker "pt_data_worker").
DATA_WORKER_NAMES = frozenset({"pt_data_worker"})

# (pid, file name under /proc/<pid>, limit) -> the file's first bytes, at most limit + 1 of them (more than limit
# means the file is larger); OSError when it cannot be read.
ProcFileReader = Callable[[int, str, int], bytes]


def read_proc_file(pid: int, name: str, limit: int, *, proc_root: Path = Path("/proc")) -> bytes:
    """At most limit + 1 bytes of /proc/<pid>/<name> (one byte more than allowed tells "too large")."""
    with open(proc_root / str(pid) / name, "rb") as f:
        return f.read(limit + 1)


def parse_environ(data: bytes, names: tuple[str, ...] = JOB_ID_VARIABLES) -> dict[str, str]:
    """The named variables of a NUL-separated environ block, decoded as os.environ does (utf-8, surrogateescape).
    The first definition of a name wins, as for getenv(3) and os.environ."""
    wanted = {n.encode() for n in names}
    found: dict[str, str] = {}
    for entry in data.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and name in wanted:
            found.setdefault(name.decode(), value.decode("utf-8", "surrogateescape"))
    return found


# torch.distributed's rank variables, read with the job id (the agent registers them; libkineto sends none, and its
# processes showed rank "-" in `dyno-cli ps` and the trace tables, and null in manifest.json)
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE")
_MAX_RANK = 2**31 - 1


def _rank_value(text: str | None) -> int | None:
    """A rank variable's value, None when missing or not a number in 0..2^31-1."""
    text = (text or "").strip()
    if not text.isdigit() or int(text) > _MAX_RANK:
        return None
    return int(text)


@dataclass(frozen=True)
class KinetoIdentity:
    """job_id: the id it registers under; aliases: other ids it also answers to (kineto's integer, when the
    environment named another); cmdline: "" when unreadable; start_time: tells it from a later process that reuses
    its pid; launcher: the torch launcher it runs ("torchrun", "torch.distributed.run", "torch.distributed.launch"),
    "" for any other program (or an unreadable command line)."""

    job_id: str
    aliases: tuple[str, ...] = ()
    cmdline: str = ""
    start_time: int = 0  # see KinetoIdentifier.start_time; 0: unknown
    launcher: str = ""
    # torch.distributed's RANK / LOCAL_RANK / WORLD_SIZE from its environment (libkineto sends none): None unknown
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None


class KinetoIdentifier:
    """identify(pid, kineto_job_id) -> KinetoIdentity. Reads /proc each call: callers cache per registration."""

    def __init__(self, read: ProcFileReader = read_proc_file, *, max_environ_bytes: int = MAX_ENVIRON_BYTES) -> None:
        self._read = read
        self._max_environ = max_environ_bytes
        # Local users choose their environments and start processes at will: warn once in a while, not per process
        self._warn = ThrottledLog(log, every_s=600.0)

    def identify(self, pid: int, kineto_job_id: str) -> KinetoIdentity:
        start_time = self.start_time(pid)  # first: the environment read next is of this process or a later one
        env = self._environ(pid)
        job_id = self._job_id_of(pid, env)
        ranks = {name.lower(): _rank_value(env.get(name)) for name in RANK_VARIABLES}
        argv = self.argv(pid)
        cmdline, launcher = " ".join(argv).strip(), torch_launcher(argv) or ""
        if launcher:
            log.debug("kineto pid %d: torch launcher (%s), never traced", pid, launcher)
        if not job_id or job_id == kineto_job_id:
            return KinetoIdentity(kineto_job_id, (), cmdline, start_time, launcher, **ranks)
        log.debug("kineto pid %d: job %r from its environment (libkineto sent %s)", pid, job_id, kineto_job_id)
        return KinetoIdentity(job_id, (kineto_job_id,), cmdline, start_time, launcher, **ranks)

    def start_time(self, pid: int) -> int:
        """When the process started, in clock ticks since boot (/proc/<pid>/stat field 22): a pid reused by another
        process has another one, whatever its uid and job. 0 when unreadable or malformed."""
        try:
            data = self._read(pid, "stat", MAX_STAT_BYTES)
        except OSError:
            return 0
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so count fields after its last ")"
        fields = data[:MAX_STAT_BYTES].rpartition(b")")[2].split()
        try:
            return max(0, int(fields[_STARTTIME_AFTER_COMM]))
        except (IndexError, ValueError):
            return 0

    def job_id(self, pid: int) -> str:
        """The job id the agent's rule finds in the process's environment; "" when unknown or unusable."""
        return self._job_id_of(pid, self._environ(pid))

    def _job_id_of(self, pid: int, env: dict[str, str]) -> str:
        job_id = job_id_from_env(env)
        if job_id and not job_id_ok(job_id):
            self._warn.warning(
                "bad-job-id",
                "kineto pid %d: job id %r from its environment is not %s; using libkineto's",
                pid,
                job_id[:200],
                JOB_ID_RULE,
            )
            return ""
        return job_id

    def _environ(self, pid: int) -> dict[str, str]:
        """The job id and rank variables of the process's environment; {} when unreadable or too large."""
        try:
            data = self._read(pid, "environ", self._max_environ)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EPERM):
                self._warn.warning(
                    "denied",
                    "cannot read /proc/%d/environ (%s): kineto processes of other users register under libkineto's "
                    "integer job id (SLURM_JOB_ID, else 0); run dynod as root (or with CAP_SYS_PTRACE) to see "
                    "Slurm array and non-Slurm job ids",
                    pid,
                    e.strerror or e,
                )
            else:  # the process exited meanwhile, or no /proc here
                log.debug("kineto pid %d: environment unreadable: %s", pid, e)
            return {}
        if len(data) > self._max_environ:
            self._warn.warning(
                "too-large",
                "kineto pid %d: environment larger than %d bytes, not searched for a job id (using libkineto's)",
                pid,
                self._max_environ,
            )
            return {}
        return parse_environ(data, JOB_ID_VARIABLES + RANK_VARIABLES)

    def is_data_worker(self, pid: int) -> bool:
        """Whether the process is a DataLoader worker (a helper of a trainer, never worth tracing first), by its
        kernel task name. Read when a request is matched, not cached: torch names the worker once its loop starts,
        after it imported torch and registered. False when unreadable or still starting."""
        try:
            data = self._read(pid, "comm", _MAX_COMM_BYTES)
        except OSError:
            return False
        return data.strip().decode("utf-8", "replace") in DATA_WORKER_NAMES

    def argv(self, pid: int) -> list[str]:
        """The kernel's view of the command line, word by word (its first MAX_CMDLINE_BYTES); [] when unreadable."""
        try:
            data = self._read(pid, "cmdline", MAX_CMDLINE_BYTES)
        except OSError:
            return []
        words = data[:MAX_CMDLINE_BYTES].removesuffix(b"\0")
        return words.decode("utf-8", "replace").split("\0") if words else []

    def cmdline(self, pid: int) -> str:
        """The kernel's view of the command line, its words joined by spaces; "" when unreadable."""
        return " ".join(self.argv(pid)).strip()

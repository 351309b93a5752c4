"""Running one analysis worker process: its output folder, its limits, its user, its timeout, its CPU time.

The worker (worker_main.py, or any command given for it) runs in a new session (its own process group, killed
whole), through limits.py (nice, RLIMIT_AS, RLIMIT_FSIZE), in a private folder that dynod made and reads back
(outcome.py), with stdin closed and stdout/stderr into a file there (bounded by RLIMIT_FSIZE; dynod reads its
tail). When dynod runs as root the worker runs as the traced processes' user (their files are theirs), else as
nobody; it may then write only the files dynod made for it, never add any (the folder stays dynod's, 0711).
"""

from __future__ import annotations

import logging
import os
import pwd
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dyno.daemon.analysis.work import AnalysisJob
from dyno.daemon.analysis.worker_main import FAILURE_FILE, PARTS_FILE, SUMMARY_FILE

__all__ = ["LOG_FILE", "WorkerCommand", "WorkerExit", "WorkerLimits", "WorkerRunner", "worker_command"]

log = logging.getLogger(__name__)

LOG_FILE = "worker.log"
_OUTPUT_FILES = (SUMMARY_FILE, PARTS_FILE, FAILURE_FILE, LOG_FILE)
_NOBODY = 65534

# (job, its output folder) -> the worker's command line, run through limits.py
WorkerCommand = Callable[[AnalysisJob, Path], Sequence[str]]


def worker_command(job: AnalysisJob, out: Path) -> list[str]:
    """dyno's own worker (-I: neither the environment's PYTHON* variables nor the working folder reach it)."""
    return [
        sys.executable,
        "-I",
        "-m",
        "dyno.daemon.analysis.worker_main",
        "--trace-id",
        job.trace_id,
        "--out",
        str(out),
        "--",
        *job.files,
    ]


@dataclass(frozen=True)
class WorkerLimits:
    timeout_s: float = 600.0
    memory_mb: int = 4096
    nice: int = 19
    file_bytes: int = 16 * 2**20  # any file it writes (its result, its log)


@dataclass(frozen=True)
class WorkerExit:
    """How a worker ended: `exit_code` as subprocess gives it (negative: the signal); `timed_out`: dynod killed it
    past its timeout; `stopped`: dynod killed it at shutdown; `cpu_s` its CPU time (children included)."""

    exit_code: int
    timed_out: bool
    stopped: bool
    cpu_s: float
    out: Path


class WorkerRunner:
    """Runs one worker at a time (the analysis queue's thread calls `run`); `stop` kills the one running."""

    def __init__(
        self,
        limits: WorkerLimits,
        command: WorkerCommand = worker_command,
        *,
        tmp_dir: Path | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self._command = command
        self._tmp_dir = tmp_dir
        self._mono = monotonic
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopping = False

    def make_out_dir(self, job: AnalysisJob) -> Path:
        """A fresh private folder holding the worker's (empty) output files, each writable by the worker's user."""
        out = Path(tempfile.mkdtemp(prefix="dynod-analysis-", dir=self._tmp_dir))
        user = self._worker_user(job)
        for name in _OUTPUT_FILES:
            fd = os.open(out / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                if user is not None:
                    os.fchown(fd, user[0], user[1])
            finally:
                os.close(fd)
        if user is not None:
            os.chmod(out, 0o711)  # the worker opens its files by name; it may add none
        return out

    @staticmethod
    def remove_out_dir(out: Path) -> None:
        for name in _OUTPUT_FILES:
            try:
                os.unlink(out / name)
            except FileNotFoundError:
                pass
        os.rmdir(out)

    @staticmethod
    def _worker_user(job: AnalysisJob) -> tuple[int, int] | None:
        """(uid, gid) the worker runs as; None: dynod's own (dynod is not root, or the traced processes are root's)."""
        if os.geteuid() != 0 or job.uid == 0:
            return None
        uid = job.uid if job.uid > 0 else _NOBODY
        try:
            return uid, pwd.getpwuid(uid).pw_gid
        except KeyError:
            return uid, _NOBODY

    def _limits_prefix(self) -> list[str]:
        lim = self.limits
        return [
            sys.executable,
            "-I",
            "-m",
            "dyno.daemon.analysis.limits",
            "--nice",
            str(lim.nice),
            "--memory-mb",
            str(lim.memory_mb),
            "--file-bytes",
            str(lim.file_bytes),
            "--",
        ]

    def run(self, job: AnalysisJob, out: Path) -> WorkerExit:
        """Start the worker for `job` writing into `out` (make_out_dir's), wait for it (killed past the timeout),
        and say how it ended. OSError when it cannot be started."""
        user = self._worker_user(job)
        with open(out / LOG_FILE, "wb") as log_file, self._lock:
            if self._stopping:
                return WorkerExit(-signal.SIGKILL, False, True, 0.0, out)
            self._proc = proc = subprocess.Popen(
                [*self._limits_prefix(), *self._command(job, out)],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=out,
                start_new_session=True,  # its own process group: killed whole (a pool of its own included)
                close_fds=True,
                user=None if user is None else user[0],  # set in C between fork and exec (no Python runs there)
                group=None if user is None else user[1],
                extra_groups=None if user is None else [],
            )
        try:
            status, cpu_s, timed_out = self._wait(proc)
        finally:
            with self._lock:
                self._proc = None
        return WorkerExit(status, timed_out, self._stopping and not timed_out, cpu_s, out)

    def _wait(self, proc: subprocess.Popen[bytes]) -> tuple[int, float, bool]:
        """(exit code, CPU seconds, timed out): the worker reaped by wait4 (for its rusage), killed past the
        timeout. Sleeps on a pidfd where the kernel has them."""
        deadline = self._mono() + self.limits.timeout_s
        timed_out = False
        try:
            pidfd: int | None = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            pidfd = None
        try:
            while True:
                with self._lock:  # reaped and marked so at once: stop() never signals a reused group id
                    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                    if pid:
                        proc.returncode = os.waitstatus_to_exitcode(status)
                        break
                    left = deadline - self._mono()
                    if left <= 0 and not timed_out:
                        timed_out = True
                        self._kill(proc)
                        left = 5.0
                if pidfd is not None:
                    select.select([pidfd], [], [], max(0.0, min(left, 5.0)))
                else:
                    time.sleep(0.05)
        finally:
            if pidfd is not None:
                os.close(pidfd)
        return proc.returncode, usage.ru_utime + usage.ru_stime, timed_out

    @staticmethod
    def _kill(proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL to the worker's process group (not yet reaped: its pid and group id are still its own)."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        """dynod stops: the running worker's process group is killed; no new one starts."""
        with self._lock:
            self._stopping = True
            if self._proc is not None and self._proc.returncode is None:
                self._kill(self._proc)

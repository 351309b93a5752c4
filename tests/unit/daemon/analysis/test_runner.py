"""The worker process as dynod runs it: its limits (nice, address space, file size), its exit and CPU time, the
timeout and shutdown kills of its whole process group, with substituted worker commands."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from dyno.daemon.analysis.runner import LOG_FILE, WorkerLimits, WorkerRunner
from dyno.daemon.analysis.work import AnalysisJob

pytestmark = pytest.mark.unit

JOB = AnalysisJob("t-1", ("/nonexistent",), "job", "user", os.getuid(), "host", 1)


def _script(code: str) -> WorkerRunner:
    """A runner whose worker is `code` (run with the output folder as argv[1])."""
    return WorkerRunner(
        WorkerLimits(timeout_s=20, memory_mb=512),
        lambda job, out: [sys.executable, "-c", textwrap.dedent(code), str(out)],
    )


def _run(runner: WorkerRunner, tmp_path: Path, job: AnalysisJob = JOB):  # type: ignore[no-untyped-def]
    runner._tmp_dir = tmp_path
    out = runner.make_out_dir(job)
    return runner.run(job, out), out


def test_the_worker_runs_niced_with_its_memory_and_file_sizes_capped_and_its_cpu_time_counted(tmp_path: Path) -> None:
    runner = _script(
        """
        import os, resource, sys, time
        t = time.process_time()
        while time.process_time() - t < 0.3:
            pass
        print(os.nice(0), resource.getrlimit(resource.RLIMIT_AS)[0], resource.getrlimit(resource.RLIMIT_FSIZE)[0],
              os.getpgid(0) == os.getpid(), os.getcwd() == sys.argv[1], open("/proc/self/oom_score_adj").read())
        """
    )
    end, out = _run(runner, tmp_path)
    assert end.exit_code == 0 and not end.timed_out and not end.stopped
    assert (out / LOG_FILE).read_text().split() == ["19", str(512 * 2**20), str(16 * 2**20), "True", "True", "1000"]
    assert 0.25 <= end.cpu_s < 5
    runner.remove_out_dir(out)
    assert not out.exists()


def test_an_allocation_past_the_memory_limit_fails_in_the_worker(tmp_path: Path) -> None:
    end, out = _run(_script("b = bytearray(1024 * 2**20)"), tmp_path)
    assert end.exit_code == 1 and "MemoryError" in (out / LOG_FILE).read_text()


def test_a_worker_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    runner = _script(
        """
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open(sys.argv[1] + "/summary.json", "w").write(str(child.pid))
        time.sleep(60)
        """
    )
    runner.limits = WorkerLimits(timeout_s=1.5, memory_mb=512)
    t0 = time.monotonic()
    end, out = _run(runner, tmp_path)
    assert end.timed_out and end.exit_code == -signal.SIGKILL and time.monotonic() - t0 < 10
    child = int((out / "summary.json").read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)  # the whole process group went


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_stop_kills_the_running_worker_and_no_other_starts(tmp_path: Path) -> None:
    runner = _script("import time; time.sleep(60)")
    result: list = []
    thread = threading.Thread(target=lambda: result.append(_run(runner, tmp_path)))
    thread.start()
    deadline = time.monotonic() + 10
    while runner._proc is None and time.monotonic() < deadline:
        time.sleep(0.01)
    runner.stop()
    thread.join(10)
    ((end, _),) = result
    assert end.stopped and end.exit_code == -signal.SIGKILL and not end.timed_out
    again, _ = _run(runner, tmp_path)
    assert again.stopped and again.cpu_s == 0.0


def test_the_default_command_is_dynos_worker_module_in_isolated_mode() -> None:
    from dyno.daemon.analysis.runner import worker_command

    cmd: Sequence[str] = worker_command(JOB, Path("/o"))
    assert cmd[:4] == [sys.executable, "-I", "-m", "dyno.daemon.analysis.worker_main"]
    assert cmd[-2:] == ["--", "/nonexistent"] and "t-1" in cmd and "/o" in cmd


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the worker runs as the traced processes' user")
def test_a_root_dynods_worker_runs_as_the_traced_user_in_a_folder_it_cannot_add_to(tmp_path: Path) -> None:
    job = AnalysisJob("t-2", (), "job", "nobody", 65534, "host", 1)
    runner = WorkerRunner(WorkerLimits(timeout_s=20, memory_mb=512), tmp_dir=tmp_path)
    out = runner.make_out_dir(job)
    assert (out.stat().st_uid, out.stat().st_mode & 0o777) == (0, 0o711)
    assert {(p.name, p.stat().st_uid) for p in out.iterdir()} == {
        (n, 65534) for n in ("summary.json", "rank_parts.bin", "failure.txt", LOG_FILE)
    }
    runner.remove_out_dir(out)

"""Helpers the bench scripts share (imported as `bench_common`: a script's own folder is first on sys.path)."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

from dyno.job_ids import JOB_ID_VARIABLES

__all__ = [
    "HTA_CASES",
    "SHARED_GPU_TRACES",
    "bytecode_env",
    "dyno_cli",
    "env_without_job_ids",
    "free_port",
    "proc_cpu_s",
    "trace_folders_args",
]

_REPO = Path(__file__).resolve().parent.parent
# The shared GPU traces (HTA's test traces, one folder per case): beside the checkout, or one level further up
# from a worktree nested a folder deeper
SHARED_GPU_TRACES = next(
    (
        p
        for p in (_REPO.parent / "shared" / "traces" / "gpu", _REPO.parent.parent / "shared" / "traces" / "gpu")
        if p.is_dir()
    ),
    _REPO.parent / "shared" / "traces" / "gpu",
)
# Its cases that the analysis benches time (bench/analysis_process.py, bench/analysis_vs_hta.py)
HTA_CASES = [
    "negative_queue_length_values_check",
    "ns_resolution_trace",
    "nccl_parser_config",
    "trace_filter",
    "simple_add",
    "alexnet",
]


def proc_cpu_s(pid: int) -> float:
    """The CPU time (user + system) process `pid` has used, in seconds (/proc/<pid>/stat's utime and stime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    """A loopback TCP port free right now (for a server that must be told its port, not bind port 0 itself)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env_without_job_ids() -> dict[str, str]:
    """This process's environment less the job-id variables, so a child is not taken for part of the caller's job."""
    return {k: v for k, v in os.environ.items() if k not in JOB_ID_VARIABLES}


def bytecode_env(cache_dir: str | os.PathLike[str]) -> dict[str, str]:
    """This process's environment for a child that reads and writes its bytecode under ``cache_dir``, as an installed
    dyno runs (pip byte-compiles a wheel's modules at install). Where PYTHONDONTWRITEBYTECODE is set (this project's
    dev machines), an editable install compiles every dyno module from source in every process: ~60 ms of each
    dyno-cli run, which no user's installed dyno pays. Run the command once before timing it, to fill the cache."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = os.fspath(cache_dir)
    return env


def dyno_cli() -> list[str]:
    """The command that runs dyno-cli: the venv's script beside this interpreter, else ``python -m dyno.client``."""
    script = Path(sys.executable).with_name("dyno-cli")
    return [str(script)] if script.exists() else [sys.executable, "-m", "dyno.client"]


def trace_folders_args(doc: str) -> argparse.Namespace:
    """The command line of a bench over a trace dir of --folders trace folders of --procs processes each, timed
    --repeat times (`doc`: the script's docstring, whose first paragraph is its description)."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--folders", type=int, default=1000)
    p.add_argument("--procs", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3)
    return p.parse_args()

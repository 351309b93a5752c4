"""`python -m dyno.daemon.analysis.limits --nice N --memory-mb M --file-bytes B -- COMMAND...`: lower this
process's priority, cap its address space and the size of any file it writes, make it the OOM killer's first
choice (oom_score_adj 1000), then exec COMMAND (the analysis worker), which inherits all four.

Set here rather than in a `preexec_fn`: dynod has many threads, and code run between fork and exec in a threaded
program may deadlock (subprocess's documentation); an exec'd process has one thread. Imports nothing of dyno's."""

from __future__ import annotations

import argparse
import os
import resource
import sys

__all__ = ["apply_limits", "main"]


def apply_limits(nice: int, memory_mb: int, file_bytes: int) -> None:
    os.nice(nice)
    try:  # the OOM killer's first choice, before dynod, whose cgroup (systemd unit) it shares
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    memory = memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash leaves no core file of someone's trace


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dyno.daemon.analysis.limits")
    p.add_argument("--nice", type=int, default=19)
    p.add_argument("--memory-mb", type=int, required=True)
    p.add_argument("--file-bytes", type=int, required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command")
    apply_limits(args.nice, args.memory_mb, args.file_bytes)
    os.execv(command[0], command)  # never returns; OSError: exit 1 with Python's message


if __name__ == "__main__":
    sys.exit(main())

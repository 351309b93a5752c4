"""dyno-cli's commands, in the order --help lists them, with the one-line help each shows there.

What the top-level parser (--help, --version, no command, an unknown one) needs, without importing a command
module (they load grpc, protobuf or the analysis stack). Each command's register() takes its help from here; a
command module not named here is not a command (a test holds the two lists equal).
"""

from __future__ import annotations

__all__ = ["COMMANDS"]

COMMANDS: dict[str, str] = {
    "status": "daemon status: samplers, GPUs, registered processes",
    "version": "daemon and client versions",
    "metrics": "GPU and host metrics (tables, --watch live, --json)",
    "ps": "registered PyTorch processes",
    "trace": "trace a job's PyTorch processes on every host, fetch the files, print the cross-rank report",
    "fetch": "fetch the files of a trace already running or finished on the daemons (e.g. after an interrupted "
    "`trace`), then analyze them",
    "analyze": "analyze PyTorch/Kineto traces: breakdowns and antipatterns",
    "jobs": "jobs ranked by wasted GPU-hours",
    "opportunities": "antipatterns ranked by the GPU-hours the fleet would recover, from the hosts' trace analyses",
}

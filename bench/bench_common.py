"""Helpers the bench scripts share (imported as `bench_common`: a script's own folder is first on sys.path)."""

from __future__ import annotations

import os
import socket

from dyno.job_ids import JOB_ID_VARIABLES

__all__ = ["env_without_job_ids", "free_port"]


def free_port() -> int:
    """A loopback TCP port free right now (for a server that must be told its port, not bind port 0 itself)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env_without_job_ids() -> dict[str, str]:
    """This process's environment less the job-id variables, so a child is not taken for part of the caller's job."""
    return {k: v for k, v in os.environ.items() if k not in JOB_ID_VARIABLES}

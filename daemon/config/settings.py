"""dynod's settings: the frozen DaemonConfig, its defaults, and the bounds its values are checked against."""

from __future__ import annotations

import grp
import os
from dataclasses import dataclass
from pathlib import Path

from dyno import exit_codes
from dyno.daemon.registry import MAX_PROCESSES, MAX_PROCESSES_PER_UID
from dyno.default_paths import AGENT_SOCKET_NAME, API_SOCKET_NAME, SYSTEM_RUNTIME_DIR, default_agent_socket
from dyno.default_paths import default_state_dir as _default_state_dir
from dyno.request_limits import MAX_DURATION_MS, MAX_ITERATIONS

__all__ = [
    "AGENT_SOCKET_NAME",
    "API_SOCKET_NAME",
    "DaemonConfig",
    "ConfigError",
    "group_id",
    "GPU_BACKENDS",
    "INT_RANGES",
    "SYSTEM_RUNTIME_DIR",
    "DEFAULT_HISTORY_MAX_BYTES",
    "MAX_HISTORY_MAX_BYTES",
    "MIN_HISTORY_MAX_BYTES",
    "MAX_ANALYSIS_MEMORY_MB",
    "MAX_ANALYSIS_QUEUE",
    "MAX_INTERVAL_S",
    "MIN_ANALYSIS_MEMORY_MB",
    "MAX_REGISTRY_CAP",
    "MAX_TRACE_RETENTION_BYTES",
    "MAX_TRACE_RETENTION_S",
    "MIN_INTERVAL_S",
    "DEFAULT_CONFIG_PATH",
    "EXIT_CODES",
    "KINETO_NAME",
    "MAX_PERIODIC_INTERVAL_S",
    "MAX_PERIODIC_RANKS",
]

DEFAULT_CONFIG_PATH = Path("/etc/dyno/dynod.toml")
GPU_BACKENDS = ("auto", "nvml", "sim", "none")
LOG_LEVELS = ("debug", "info", "warning", "error")
# The shortest sampling interval. NVML refreshes GPU utilization every 1/6 s to 1 s depending on the product,
# averages power over 1 s (Ampere and later), and its GPM metrics need samples > 100 ms apart: a faster loop reads
# the same values again. One tick (host + 8 GPUs, history append) costs ~0.22 ms of CPU on a 2-core VM with the
# simulator (bench/sample_cost.py), more with real NVML calls: at 0.1 s that is already ~0.2% of a core.
MIN_INTERVAL_S = 0.1
# Upper bounds, so that a typo (an extra digit, a value in ms) is an error rather than a daemon that never samples
# or never cleans up: a day between samples, traces kept ten years at most, a trace dir of at most 1 PiB.
MAX_INTERVAL_S = 86400.0
MAX_TRACE_RETENTION_S = 10 * 365 * 86400.0
MAX_TRACE_RETENTION_BYTES = 2**50
MIN_JOB_FLUSH_S = 0.1
MAX_JOB_S = 86400.0
MIN_JOB_RETENTION_BYTES = 2**20
# The analysis worker's bounds: numpy and a trace's columns need a few hundred MiB at the least; a queue past 1024
# traces would only be analysed hours late.
MIN_ANALYSIS_MEMORY_MB = 256
MAX_ANALYSIS_MEMORY_MB = 2**20
MAX_ANALYSIS_QUEUE = 1024
# The history's default memory budget (history.MAX_HISTORY_BYTES). systemd/dynod.service has MemoryHigh=256M,
# MemoryMax=512M and dynod's own steady state is ~55 MB; this leaves room for trace transfers and a 32 MiB
# GetMetrics answer: ~10 hours of 1 s samples of 8 GPUs, ~1 hour at 0.1 s (docs/BENCHMARKS.md).
DEFAULT_HISTORY_MAX_BYTES = 96 * 1024**2
MIN_HISTORY_MAX_BYTES = 2**20  # 1 MiB: a few hundred samples of 8 GPUs
MAX_HISTORY_MAX_BYTES = 2**36  # 64 GiB
# The process registry's caps (max_processes, max_processes_per_uid; defaults registry.MAX_PROCESSES and
# MAX_PROCESSES_PER_UID). An entry takes up to ~5 KB (its command line is capped at 4 KB), so the largest cap is
# ~320 MB of registry: far past the unit's MemoryMax, raise it together with the cap.
MAX_REGISTRY_CAP = 65536
# Periodic profiling (dyno.daemon.profiling): a moment at most a week apart, at most this many ranks per host
MAX_PERIODIC_INTERVAL_S = 7 * 86400.0
MAX_PERIODIC_RANKS = 1024
# The integer keys whose values must lie in one closed range: the flag's parser and the file's check both read it
INT_RANGES: dict[str, tuple[int, int]] = {
    "max_processes": (1, MAX_REGISTRY_CAP),
    "max_processes_per_uid": (1, MAX_REGISTRY_CAP),
    "periodic_iterations": (1, MAX_ITERATIONS),
    "periodic_duration_ms": (1, MAX_DURATION_MS),
    "periodic_ranks_per_host": (1, MAX_PERIODIC_RANKS),
    "analysis_memory_mb": (MIN_ANALYSIS_MEMORY_MB, MAX_ANALYSIS_MEMORY_MB),
    "analysis_queue": (1, MAX_ANALYSIS_QUEUE),
}
# The name libkineto connects to: the default abstract socket, and the fixed file name in --kineto-socket-dir mode.
KINETO_NAME = "dynolog"


# dynod's exit codes (daemon/main.py returns them; --help prints them)
EXIT_CODES: dict[int, str] = {
    exit_codes.OK: "stopped cleanly (SIGTERM or SIGINT)",
    exit_codes.FAILURE: "cannot start (a port or socket in use, a directory that cannot be written...)",
    exit_codes.USAGE: "configuration error in the flags or the config file (one line: dynod: error: ...)",
}


def group_id(name: str) -> int:
    """A group's gid from its name or a decimal gid; KeyError when there is no such group."""
    if name.isdigit():
        return int(name)
    return grp.getgrnam(name).gr_gid


class ConfigError(Exception):
    """A user mistake in flags or the config file; the entry point prints it as one line and exits 2."""


def _default_trace_dir() -> Path:
    # Under /tmp: newer libkineto only writes on-demand traces below KINETO_ONDEMAND_TRACE_DIR (default /tmp/).
    return Path("/tmp") / ("dyno-traces" if os.geteuid() == 0 else f"dyno-traces-{os.geteuid()}")


@dataclass(frozen=True)
class DaemonConfig:
    listen: str = "127.0.0.1"
    port: int = 1778
    metrics_port: int = 9778  # 0 disables the Prometheus endpoint
    metrics_listen: str = ""  # empty: same as listen
    dcgm_metrics: bool = False  # also export dcgm-exporter's series (dcgm_view.py)
    gpu_backend: str = "auto"
    sim_gpus: int = 8
    interval_s: float = 1.0
    history_s: float = 3600.0
    history_max_bytes: int = DEFAULT_HISTORY_MAX_BYTES  # the oldest samples go first past it
    state_dir: Path = _default_state_dir()
    trace_dir: Path = _default_trace_dir()
    agent_socket: Path | None = None  # None: <runtime dir>/agent.sock
    api_socket: Path | None = None  # None: dyno.sock beside the agent socket
    kineto_endpoint: str = KINETO_NAME  # abstract socket name; "off" disables
    kineto_socket_dir: Path | None = None  # filesystem-socket mode (KINETO_IPC_SOCKET_DIR)
    trace_retention_bytes: int = 10 * 1024**3
    trace_retention_s: float = 7 * 24 * 3600.0
    # registered trainer processes kept at most (past it a new one is refused: RESOURCE_EXHAUSTED), in all and of
    # one uid (so that one user's runaway launcher leaves room for other users' trainers)
    max_processes: int = MAX_PROCESSES
    max_processes_per_uid: int = MAX_PROCESSES_PER_UID
    # job accounting (dyno.daemon.jobs): records written to state_dir/jobs.sqlite3 at most every job_flush_s, at each
    # job's end and at stop; a job ends job_grace_s after its last process was seen; ended records are kept
    # job_retention_s and within job_retention_bytes (the oldest go first)
    job_flush_s: float = 60.0
    job_grace_s: float = 120.0
    job_retention_s: float = 90 * 24 * 3600.0
    job_retention_bytes: int = 256 * 1024**2
    # periodic profiling (dyno.daemon.profiling, docs/PERIODIC.md): each running job traced every
    # periodic_interval_s (0: off) at moments derived from its job id, periodic_iterations optimizer steps (agent
    # processes) or periodic_duration_ms (libkineto ones), in its periodic_ranks_per_host lowest ranks on this host,
    # never more than periodic_budget of its time, not before it is periodic_min_job_age_s old
    periodic_interval_s: float = 0.0
    periodic_iterations: int = 5
    periodic_duration_ms: int = 3000
    periodic_ranks_per_host: int = 1
    periodic_budget: float = 0.01
    periodic_min_job_age_s: float = 300.0
    # host-side analysis of finished traces (dyno.daemon.analysis): one worker process at a time, niced, its address
    # space capped at analysis_memory_mb, killed past analysis_timeout_s; at most analysis_queue traces wait
    analysis_enabled: bool = True
    analysis_timeout_s: float = 600.0
    analysis_memory_mb: int = 4096
    analysis_queue: int = 16
    auth_token_file: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_ca: Path | None = None
    # local users other than root, dynod's own and this group's members touch only their own processes
    admin_group: str = ""
    # serve callers on non-loopback addresses without a token or mTLS (refused at start otherwise)
    insecure_allow_unauthenticated_remote: bool = False
    log_level: str = "info"
    config_path: Path | None = None  # the file that was read, if any

    @property
    def agent_socket_path(self) -> Path:
        if self.agent_socket is not None:
            return self.agent_socket
        return default_agent_socket()

    @property
    def api_socket_path(self) -> Path:
        if self.api_socket is not None:
            return self.api_socket
        return self.agent_socket_path.parent / API_SOCKET_NAME

    @property
    def history_len(self) -> int:
        """Ring capacity in samples."""
        return max(1, int(round(self.history_s / self.interval_s)))

"""dynod's command line (`dynod --help`); every flag defaults to None, so only the flags given override the file."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from dyno import exit_codes
from dyno.argtypes import number
from dyno.daemon.config.settings import (
    API_SOCKET_NAME,
    DEFAULT_CONFIG_PATH,
    EXIT_CODES,
    GPU_BACKENDS,
    INT_RANGES,
    KINETO_NAME,
    LOG_LEVELS,
    MAX_HISTORY_MAX_BYTES,
    MAX_INTERVAL_S,
    MAX_JOB_S,
    MAX_PERIODIC_INTERVAL_S,
    MAX_REGISTRY_CAP,
    MAX_TRACE_RETENTION_BYTES,
    MAX_TRACE_RETENTION_S,
    MIN_HISTORY_MAX_BYTES,
    MIN_INTERVAL_S,
    MIN_JOB_FLUSH_S,
    MIN_JOB_RETENTION_BYTES,
    DaemonConfig,
)

__all__ = ["build_parser"]

_positive_float = number(float, gt=0)
_port = number(int, ge=0, le=65535)
_count = number(int, ge=1, le=64)


def _int_in_range(key: str) -> Callable[[str], int | float]:
    """The parser of a key of INT_RANGES: an integer within its range."""
    lo, hi = INT_RANGES[key]
    return number(int, ge=lo, le=hi)


_D = DaemonConfig  # its field defaults, quoted in --help


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dynod",
        description="dyno per-host daemon: samples GPU and host counters, keeps recent history, serves the "
        "dyno.v1 gRPC API and Prometheus metrics, and hands on-demand trace requests to registered "
        "PyTorch processes.",
        epilog=f"Settings come from flags, then the TOML file (--config, default {DEFAULT_CONFIG_PATH} if present; "
        "keys are the flag names with '_' for '-'), then defaults. " + exit_codes.describe(EXIT_CODES),
    )
    # Every default is None so that only flags the user gave override the file.
    a = p.add_argument
    a("--config", type=Path, help=f"TOML config file (default: {DEFAULT_CONFIG_PATH} if it exists)")
    a(
        "--listen",
        help="address of the gRPC and metrics servers (default 127.0.0.1; other addresses need "
        "--auth-token-file or mTLS, else dynod refuses to start without --insecure-allow-unauthenticated-remote)",
    )
    a("--metrics-listen", help="address of the metrics server when it differs from --listen (default: --listen)")
    a("--port", type=_port, help="gRPC port (default 1778; 0 picks a free one and logs it)")
    a("--metrics-port", type=_port, help="Prometheus /metrics HTTP port (default 9778; 0 disables)")
    a(
        "--dcgm-metrics",
        action=argparse.BooleanOptionalAction,
        help="also export the series dcgm-exporter exports by default that NVML gives (DCGM_FI_DEV_GPU_UTIL, ...; "
        "its names, units and labels), so dashboards and alerts written for it work without DCGM (default off)",
    )
    a(
        "--gpu-backend",
        choices=GPU_BACKENDS,
        help="auto or nvml: NVML, else the GPU sampler reports unavailable with the reason (never simulated); "
        "sim: --sim-gpus simulated GPUs (labelled simulated) for machines without GPUs; none: no GPU sampling "
        "(default auto)",
    )
    a("--sim-gpus", type=_count, help="number of simulated GPUs with --gpu-backend sim (1-64, default 8)")
    a(
        "--interval-s",
        type=_positive_float,
        help=f"sampling interval in seconds (default {_D.interval_s:g}; {MIN_INTERVAL_S:g}-{MAX_INTERVAL_S:g}: "
        "NVML updates no faster than every 0.1 s)",
    )
    a(
        "--history-s",
        type=_positive_float,
        help=f"seconds of samples kept in memory (default {_D.history_s:g}; at least --interval-s, at most 1000000 "
        "samples)",
    )
    a(
        "--history-max-bytes",
        type=number(int, gt=0),
        help="memory budget of the history: past it the oldest samples go, with one warning at start naming the "
        f"window kept (default {_D.history_max_bytes}, 96 MiB; {MIN_HISTORY_MAX_BYTES}-{MAX_HISTORY_MAX_BYTES}, "
        "1 MiB-64 GiB)",
    )
    a(
        "--state-dir",
        type=Path,
        help="state directory (default /var/lib/dyno as root, else $XDG_STATE_HOME/dyno, i.e. ~/.local/state/dyno "
        "when XDG_STATE_HOME is unset)",
    )
    a(
        "--trace-dir",
        type=Path,
        help="where trainers write trace files: a folder of dynod's own, not a shared one such as /tmp (default "
        "/tmp/dyno-traces as root, else /tmp/dyno-traces-UID)",
    )
    a(
        "--agent-socket",
        type=Path,
        help="Unix socket of the local Agent service (default /run/dyno/agent.sock as root, else "
        "$XDG_RUNTIME_DIR/dyno/agent.sock, else STATE_DIR/run/agent.sock when XDG_RUNTIME_DIR is unset)",
    )
    a(
        "--api-socket",
        type=Path,
        help=f"Unix socket of the Dyno API for local callers, identified by the kernel (default {API_SOCKET_NAME} "
        "beside --agent-socket; dyno-cli uses it for the local host when it exists)",
    )
    a(
        "--kineto-endpoint",
        help=f"abstract socket name for libkineto's daemon protocol, KINETO_USE_DAEMON=1 trainers (default "
        f"{KINETO_NAME}; off disables it). Not used with --kineto-socket-dir: giving both (a name other than "
        f"{KINETO_NAME}, or off) is a configuration error",
    )
    a(
        "--kineto-socket-dir",
        type=Path,
        metavar="DIR",
        help=f"serve libkineto as the filesystem socket DIR/{KINETO_NAME} instead of the abstract socket (trainers "
        "set KINETO_IPC_SOCKET_DIR=DIR)",
    )
    a(
        "--trace-retention-bytes",
        type=number(int, gt=0),
        help="delete the oldest finished traces while the trace dir holds more than this many bytes (default "
        f"{_D.trace_retention_bytes}, 10 GiB; 1-{MAX_TRACE_RETENTION_BYTES}, 1 PiB)",
    )
    a(
        "--trace-retention-s",
        type=_positive_float,
        help=f"delete finished traces older than this many seconds (default {_D.trace_retention_s:g}, 7 days; > 0, "
        f"at most {MAX_TRACE_RETENTION_S:.0f}, 10 years)",
    )
    a(
        "--max-processes",
        type=_int_in_range("max_processes"),
        help="most trainer processes registered at once; past it a new one is refused with RESOURCE_EXHAUSTED "
        f"(default {_D.max_processes}; 1-{MAX_REGISTRY_CAP}; an entry takes up to ~5 KB)",
    )
    a(
        "--max-processes-per-uid",
        type=_int_in_range("max_processes_per_uid"),
        help="most of them of one user, so that one user's runaway launcher leaves room for other users' trainers "
        f"(default {_D.max_processes_per_uid}; 1-{MAX_REGISTRY_CAP}; --max-processes still caps the total)",
    )
    a(
        "--job-flush-s",
        type=_positive_float,
        help=f"write job records to the job database at most this often (default {_D.job_flush_s:g}; a kill -9 loses "
        f"at most this much; {MIN_JOB_FLUSH_S:g}-{MAX_JOB_S:.0f})",
    )
    a(
        "--job-grace-s",
        type=_positive_float,
        help=f"a job ends when none of its processes was seen for this long (default {_D.job_grace_s:g}; "
        f"at most {MAX_JOB_S:.0f})",
    )
    a(
        "--job-retention-s",
        type=_positive_float,
        help=f"delete ended job records older than this (default {_D.job_retention_s:g}, 90 days; at most "
        f"{MAX_TRACE_RETENTION_S:.0f}, 10 years)",
    )
    a(
        "--job-retention-bytes",
        type=number(int, gt=0),
        help=f"delete the oldest ended job records while they take more than this (default {_D.job_retention_bytes}, "
        f"256 MiB; at least {MIN_JOB_RETENTION_BYTES}, 1 MiB)",
    )
    a(
        "--periodic-interval-s",
        type=number(float, ge=0),
        help="trace each running job every this many seconds, at moments derived from its job id so that every host "
        "of the job traces the same steps under the same trace id, periodic-<job>-<UTC time> (default 0: off; 1-"
        f"{MAX_PERIODIC_INTERVAL_S:.0f}; e.g. 1800; docs/PERIODIC.md)",
    )
    a(
        "--periodic-iterations",
        type=_int_in_range("periodic_iterations"),
        help=f"optimizer steps a periodic trace records in agent processes (default {_D.periodic_iterations})",
    )
    a(
        "--periodic-duration-ms",
        type=_int_in_range("periodic_duration_ms"),
        help=f"milliseconds a periodic trace records in libkineto processes (default {_D.periodic_duration_ms})",
    )
    a(
        "--periodic-ranks-per-host",
        type=_int_in_range("periodic_ranks_per_host"),
        help="how many processes of a job a periodic trace takes on this host: its lowest registered ranks "
        f"(default {_D.periodic_ranks_per_host})",
    )
    a(
        "--periodic-budget",
        type=number(float, gt=0, le=1),
        help="the most of a job's time its processes spend under periodic profiling: moments that would exceed it "
        f"are skipped (default {_D.periodic_budget:g}, 1%%; > 0, at most 1)",
    )
    a(
        "--periodic-min-job-age-s",
        type=number(float, ge=0, le=MAX_JOB_S),
        help=f"skip jobs younger than this (default {_D.periodic_min_job_age_s:g}; 0-{MAX_JOB_S:.0f})",
    )
    a(
        "--analysis-enabled",
        action=argparse.BooleanOptionalAction,
        help="analyse every finished trace on this host in a separate worker process, and keep its summary with the "
        "job's record (GetTraceSummary, ListJobs, dyno_job_analysis_* series; default on)",
    )
    a(
        "--analysis-timeout-s",
        type=_positive_float,
        help=f"kill an analysis worker running longer than this (default {_D.analysis_timeout_s:g}; at most "
        f"{MAX_JOB_S:.0f})",
    )
    a(
        "--analysis-memory-mb",
        type=_int_in_range("analysis_memory_mb"),
        help=f"the analysis worker's address space limit (RLIMIT_AS; default {_D.analysis_memory_mb})",
    )
    a(
        "--analysis-queue",
        type=_int_in_range("analysis_queue"),
        help=f"finished traces waiting for the analysis worker at most; past it the oldest is dropped (default "
        f"{_D.analysis_queue})",
    )
    a(
        "--auth-token-file",
        type=Path,
        help="file holding a shared bearer token required by StartTrace, CancelTrace, FetchTraceFile and "
        "StreamMetrics, and to see processes' command lines in ListProcesses (set it on a shared host even on "
        "loopback: a root dynod without it warns at start)",
    )
    a("--tls-cert", type=Path, help="server certificate (PEM) for TLS")
    a("--tls-key", type=Path, help="server private key (PEM) for TLS")
    a("--tls-ca", type=Path, help="CA bundle (PEM): with it, clients must present certificates (mTLS)")
    a(
        "--admin-group",
        metavar="GROUP",
        help="group (name or gid) whose members, like root and dynod's own user, see and trace every user's "
        "processes; other local users without the token see the command lines of, trace, cancel and fetch only "
        "their own (default: none)",
    )
    a(
        "--insecure-allow-unauthenticated-remote",
        action="store_const",
        const=True,
        help="listen beyond loopback with neither --auth-token-file nor --tls-ca: anyone who reaches the port may "
        "trace every process and fetch every trace file (without it dynod refuses to start so)",
    )
    a("--log-level", choices=LOG_LEVELS, help="log verbosity (default info)")
    return p

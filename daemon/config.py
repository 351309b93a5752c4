"""dynod configuration: flags over an optional TOML file over defaults, resolved once into a frozen dataclass."""

from __future__ import annotations

import argparse
import difflib
import grp
import math
import os
import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from dyno import exit_codes
from dyno.argtypes import number
from dyno.daemon.registry import MAX_PROCESSES, MAX_PROCESSES_PER_UID
from dyno.default_paths import AGENT_SOCKET_NAME, API_SOCKET_NAME, SYSTEM_RUNTIME_DIR, default_agent_socket
from dyno.default_paths import default_state_dir as _default_state_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = [
    "AGENT_SOCKET_NAME",
    "API_SOCKET_NAME",
    "DaemonConfig",
    "ConfigError",
    "group_id",
    "GPU_BACKENDS",
    "SYSTEM_RUNTIME_DIR",
    "DEFAULT_HISTORY_MAX_BYTES",
    "MAX_HISTORY_MAX_BYTES",
    "MIN_HISTORY_MAX_BYTES",
    "MAX_INTERVAL_S",
    "MAX_REGISTRY_CAP",
    "MAX_TRACE_RETENTION_BYTES",
    "MAX_TRACE_RETENTION_S",
    "MIN_INTERVAL_S",
    "DEFAULT_CONFIG_PATH",
    "EXIT_CODES",
    "KINETO_NAME",
    "build_parser",
    "resolve_config",
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


_PATH_KEYS = {
    "state_dir",
    "trace_dir",
    "agent_socket",
    "api_socket",
    "kineto_socket_dir",
    "auth_token_file",
    "tls_cert",
    "tls_key",
    "tls_ca",
}
_FILE_KEYS = {f.name for f in fields(DaemonConfig)} - {"config_path"}


# Trace retention deletes every folder of the trace dir past its age or size, whoever made it: the trace dir must
# be dynod's own, never one of these (nor the state dir or above it).
_SHARED_DIRS = (
    "/", "/tmp", "/var/tmp", "/dev/shm", "/run", "/var", "/var/lib", "/home", "/root", "/usr", "/etc", "/opt",
    "/srv", "/mnt", "/media",
)  # fmt: skip


def _shared_dir_problem(trace_dir_value: Path) -> str | None:
    trace_dir = os.path.realpath(trace_dir_value)
    home = os.path.expanduser("~")  # not Path.home(): it raises for a uid without a passwd entry (containers)
    shared = {os.path.realpath(d) for d in (*_SHARED_DIRS, home) if os.path.isabs(d)}
    if trace_dir in shared:
        own = Path(trace_dir) / "dyno-traces"
        return (
            f"trace_dir {trace_dir_value} is a shared directory: trace retention deletes every folder in the "
            f"trace dir older than trace_retention_s; give dynod a folder of its own, e.g. {own}"
        )
    return None


_positive_float = number(float, gt=0)
_port = number(int, ge=0, le=65535)
_count = number(int, ge=1, le=64)
_registry_cap = number(int, ge=1, le=MAX_REGISTRY_CAP)


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
        type=_registry_cap,
        help="most trainer processes registered at once; past it a new one is refused with RESOURCE_EXHAUSTED "
        f"(default {_D.max_processes}; 1-{MAX_REGISTRY_CAP}; an entry takes up to ~5 KB)",
    )
    a(
        "--max-processes-per-uid",
        type=_registry_cap,
        help="most of them of one user, so that one user's runaway launcher leaves room for other users' trainers "
        f"(default {_D.max_processes_per_uid}; 1-{MAX_REGISTRY_CAP}; --max-processes still caps the total)",
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


def _with_hint(key: str) -> str:
    """`key`, and the key probably meant: flags are spelled with '-' and keys with '_' (metrics-port)."""
    close = difflib.get_close_matches(key.replace("-", "_"), sorted(_FILE_KEYS), n=1, cutoff=0.75)
    return f"{key} (did you mean {close[0]}?)" if close else key


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            raw = f.read()
        # an editor's UTF-8 byte order mark is no TOML: tomllib said "Invalid statement (at line 1, column 1)"
        data = tomllib.loads(raw.removeprefix(b"\xef\xbb\xbf").decode("utf-8"))
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config file {path} is not valid TOML: {e}") from None
    except UnicodeDecodeError as e:  # tomllib decodes the whole file first; TOML files must be UTF-8
        raise ConfigError(f"config file {path} is not valid TOML: not UTF-8 (byte {e.start})") from None
    unknown = sorted(set(data) - _FILE_KEYS)
    if unknown:
        raise ConfigError(f"config file {path}: unknown key(s) {', '.join(map(_with_hint, unknown))}")
    return data


def _coerce(key: str, value: Any, source: str) -> Any:
    default = getattr(DaemonConfig, key, None)
    if key in _PATH_KEYS:
        if not isinstance(value, (str, Path)) or not str(value):
            raise ConfigError(f"{source}: {key} must be a non-empty path")
        return Path(value)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: {key} must be true or false")
        return value
    if isinstance(default, str):
        if not isinstance(value, str):
            raise ConfigError(f"{source}: {key} must be a string")
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{source}: {key} must be an integer")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{source}: {key} must be a number")
        if not math.isfinite(value):  # TOML has inf and nan; no duration means them
            raise ConfigError(f"{source}: {key} must be a finite number")
        return float(value)
    return value


def _value_problem(key: str, value: Any) -> str | None:
    """What is wrong with one key's value on its own, whatever the other keys say; None when nothing is."""
    if key == "listen" and (not value or any(c.isspace() for c in value)):
        # else gRPC's C core fails the bind late with "host must not be empty" (exit 1, not a config error)
        return f"listen must be a host name or address, not {value!r}"
    if key == "metrics_listen" and any(c.isspace() for c in value):
        return f"metrics_listen must be a host name or address, not {value!r}"
    if key == "gpu_backend" and value not in GPU_BACKENDS:
        return f"gpu_backend must be one of {', '.join(GPU_BACKENDS)}, not {value!r}"
    if key == "log_level" and value not in LOG_LEVELS:
        return f"log_level must be one of {', '.join(LOG_LEVELS)}"
    if key in ("port", "metrics_port") and not 0 <= value <= 65535:
        return f"{key} out of range 0-65535"
    if key == "sim_gpus" and not 1 <= value <= 64:
        return "sim_gpus must be 1-64"
    if key == "interval_s" and not value >= MIN_INTERVAL_S:  # a 1 us interval spun the sampling loop
        return (
            f"interval_s {value:g} is below the minimum of {MIN_INTERVAL_S:g} s (NVML updates its counters no faster)"
        )
    if key == "interval_s" and value > MAX_INTERVAL_S:
        return f"interval_s {value:g} is above the maximum of {MAX_INTERVAL_S:g} s"
    if key == "history_s" and not value > 0:
        return "history_s must be > 0"
    if key == "history_max_bytes" and not MIN_HISTORY_MAX_BYTES <= value <= MAX_HISTORY_MAX_BYTES:
        return f"history_max_bytes {value} is outside {MIN_HISTORY_MAX_BYTES}-{MAX_HISTORY_MAX_BYTES} (1 MiB-64 GiB)"
    if key == "trace_retention_bytes" and value <= 0:  # 0 is no "unlimited": every finished trace went at once
        return "trace_retention_bytes must be > 0 (there is no unlimited; give a size)"
    if key == "trace_retention_bytes" and value > MAX_TRACE_RETENTION_BYTES:
        return f"trace_retention_bytes {value} is above the maximum of {MAX_TRACE_RETENTION_BYTES} (1 PiB)"
    if key == "trace_retention_s" and not value > 0:  # else every finished trace is deleted at the next pass
        return "trace_retention_s must be > 0"
    if key == "trace_retention_s" and value > MAX_TRACE_RETENTION_S:
        return f"trace_retention_s {value:g} is above the maximum of {MAX_TRACE_RETENTION_S:.0f} (10 years)"
    if key in ("max_processes", "max_processes_per_uid") and not 1 <= value <= MAX_REGISTRY_CAP:
        return f"{key} {value} is outside 1-{MAX_REGISTRY_CAP}"
    if key == "trace_dir":
        return _shared_dir_problem(value)
    if key == "admin_group" and value:
        try:
            group_id(value)
        except KeyError:
            return f"admin_group {value!r}: no such group"
    if key == "kineto_endpoint" and (not value or "\0" in value or "/" in value):
        return "kineto_endpoint must be a plain name (or 'off')"
    return None


def _check_value(key: str, value: Any, source: str) -> None:
    problem = _value_problem(key, value)
    if problem is not None:
        raise ConfigError(f"{source}: {problem}")


def _check_combination(cfg: DaemonConfig, sources: dict[str, str]) -> None:
    """The rules between keys, on the resolved config; an error names where each key involved came from."""

    def where(*keys: str) -> str:
        named = dict.fromkeys(sources[k] for k in keys if k in sources)  # ordered, without repeats
        return " and ".join(named) or "defaults"

    if cfg.port == cfg.metrics_port != 0 and (cfg.metrics_listen or cfg.listen) == cfg.listen:
        raise ConfigError(
            f"{where('port', 'metrics_port')}: port and metrics_port are both {cfg.port}; "
            "give the metrics endpoint its own"
        )
    if cfg.history_s < cfg.interval_s:
        raise ConfigError(
            f"{where('history_s', 'interval_s')}: history_s ({cfg.history_s:g}) is shorter than interval_s "
            f"({cfg.interval_s:g})"
        )
    if cfg.history_s / cfg.interval_s > 1_000_000:  # the ratio, not history_len: 1e300 printed 300 digits
        samples = cfg.history_s / cfg.interval_s
        raise ConfigError(
            f"{where('history_s', 'interval_s')}: history_s / interval_s = {samples:.6g} samples; at most 1000000"
        )
    trace_dir, state_dir = os.path.realpath(cfg.trace_dir), os.path.realpath(cfg.state_dir)
    if os.path.commonpath([trace_dir, state_dir]) == trace_dir:
        raise ConfigError(
            f"{where('trace_dir', 'state_dir')}: trace_dir {cfg.trace_dir} holds the state_dir {cfg.state_dir}, "
            "whose folders trace retention would delete; use separate folders"
        )
    if bool(cfg.tls_cert) != bool(cfg.tls_key):
        raise ConfigError(f"{where('tls_cert', 'tls_key')}: tls_cert and tls_key must be given together")
    if cfg.tls_ca and not cfg.tls_cert:
        raise ConfigError(f"{where('tls_ca')}: tls_ca needs tls_cert and tls_key")
    if cfg.kineto_socket_dir is not None and "kineto_endpoint" in sources and cfg.kineto_endpoint != KINETO_NAME:
        # Socket-dir mode serves libkineto's fixed name DIR/dynolog: another name, or "off", cannot be honoured, and
        # was silently ignored. "dynolog" itself (the default, as the shipped example file spells it) agrees.
        raise ConfigError(
            f"{where('kineto_endpoint', 'kineto_socket_dir')}: kineto_endpoint {cfg.kineto_endpoint!r} conflicts with "
            f"kineto_socket_dir {cfg.kineto_socket_dir} (which serves libkineto as {cfg.kineto_socket_dir}/"
            f'{KINETO_NAME}); give one of them (no kineto endpoint at all: kineto_endpoint = "off" alone)'
        )


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _unbracket(key: str, value: Any) -> Any:
    """A bracketed address, "[::1]" as in a URL or a gRPC target, means the address ::1."""
    if key in ("listen", "metrics_listen") and isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        return value[1:-1]
    return value


def resolve_config(args: argparse.Namespace, default_path: Path = DEFAULT_CONFIG_PATH) -> DaemonConfig:
    """Flags over file over defaults. Raises ConfigError for anything the user must fix.

    Every value the file sets is checked on its own, even where a flag overrides it: a bad file is reported
    (naming the file and the key) the first time dynod reads it, not the day the overriding flag goes away. The
    rules between keys (history_s >= interval_s, tls_cert with tls_key, ...) apply to the resolved values, since a
    file may leave part of a pair to the command line."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    path: Path | None = args.config
    if path is None and default_path.exists():
        path = default_path
    if path is not None:
        for key, raw in _read_file(path).items():
            value = _unbracket(key, _coerce(key, raw, str(path)))
            _check_value(key, value, str(path))
            values[key], sources[key] = value, str(path)
    for f in fields(DaemonConfig):
        flag_value = getattr(args, f.name, None)
        if f.name != "config_path" and flag_value is not None:
            value = _unbracket(f.name, flag_value)
            _check_value(f.name, value, _flag(f.name))
            values[f.name], sources[f.name] = value, _flag(f.name)
    cfg = DaemonConfig(**values, config_path=path)
    for f in fields(DaemonConfig):  # the defaults too, as ever: the default dirs come from $HOME and $XDG_*
        if f.name not in sources:
            _check_value(f.name, getattr(cfg, f.name), "default")
    _check_combination(cfg, sources)
    return _absolute(cfg)


def _absolute(cfg: DaemonConfig) -> DaemonConfig:
    """Every path made absolute (against dynod's working directory at start, where a relative one pointed): what
    GetStatus reports and `dyno-cli status` prints must mean the same from any directory."""
    paths = {k: getattr(cfg, k) for k in (*_PATH_KEYS, "config_path")}
    absolute: dict[str, Any] = {k: Path(os.path.abspath(v)) for k, v in paths.items() if v is not None}
    return replace(cfg, **absolute)

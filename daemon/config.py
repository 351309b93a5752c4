"""dynod configuration: flags over an optional TOML file over defaults, resolved once into a frozen dataclass."""

from __future__ import annotations

import argparse
import difflib
import math
import os
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from dyno.argtypes import number

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = ["DaemonConfig", "ConfigError", "GPU_BACKENDS", "DEFAULT_CONFIG_PATH", "build_parser", "resolve_config"]

DEFAULT_CONFIG_PATH = Path("/etc/dyno/dynod.toml")
GPU_BACKENDS = ("auto", "nvml", "sim", "none")
LOG_LEVELS = ("debug", "info", "warning", "error")


class ConfigError(Exception):
    """A user mistake in flags or the config file; the entry point prints it as one line and exits 2."""


def _default_state_dir() -> Path:
    # Root gets the FHS location; a normal user a directory it can write without set-up.
    if os.geteuid() == 0:
        return Path("/var/lib/dyno")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "dyno"


def _default_runtime_dir() -> Path:
    if os.geteuid() == 0:
        return Path("/run/dyno")
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    return Path(xdg) / "dyno" if xdg else _default_state_dir() / "run"


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
    state_dir: Path = _default_state_dir()
    trace_dir: Path = _default_trace_dir()
    agent_socket: Path | None = None  # None: <runtime dir>/agent.sock
    kineto_endpoint: str = "dynolog"  # abstract socket name; "off" disables
    kineto_socket_dir: Path | None = None  # filesystem-socket mode (KINETO_IPC_SOCKET_DIR)
    trace_retention_bytes: int = 10 * 1024**3
    trace_retention_s: float = 7 * 24 * 3600.0
    auth_token_file: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_ca: Path | None = None
    log_level: str = "info"
    config_path: Path | None = None  # the file that was read, if any

    @property
    def agent_socket_path(self) -> Path:
        return self.agent_socket if self.agent_socket is not None else _default_runtime_dir() / "agent.sock"

    @property
    def history_len(self) -> int:
        """Ring capacity in samples."""
        return max(1, int(round(self.history_s / self.interval_s)))


_PATH_KEYS = {
    "state_dir",
    "trace_dir",
    "agent_socket",
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


def _check_trace_dir(cfg: DaemonConfig, where: str) -> None:
    trace_dir = os.path.realpath(cfg.trace_dir)
    home = os.path.expanduser("~")  # not Path.home(): it raises for a uid without a passwd entry (containers)
    shared = {os.path.realpath(d) for d in (*_SHARED_DIRS, home) if os.path.isabs(d)}
    if trace_dir in shared:
        own = Path(trace_dir) / "dyno-traces"
        raise ConfigError(
            f"{where}: trace_dir {cfg.trace_dir} is a shared directory: trace retention deletes every folder in the "
            f"trace dir older than trace_retention_s; give dynod a folder of its own, e.g. {own}"
        )
    state_dir = os.path.realpath(cfg.state_dir)
    if os.path.commonpath([trace_dir, state_dir]) == trace_dir:
        raise ConfigError(
            f"{where}: trace_dir {cfg.trace_dir} holds the state_dir {cfg.state_dir}, whose folders trace retention "
            "would delete; use separate folders"
        )


_positive_float = number(float, gt=0)
_port = number(int, ge=0, le=65535)
_count = number(int, ge=1, le=64)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dynod",
        description="dyno per-host daemon: samples GPU and host counters, keeps recent history, serves the "
        "dyno.v1 gRPC API and Prometheus metrics, and hands on-demand trace requests to registered "
        "PyTorch processes.",
        epilog=f"Settings come from flags, then the TOML file (--config, default {DEFAULT_CONFIG_PATH} if present; "
        "keys are the flag names with '_' for '-'), then defaults.",
    )
    # Every default is None so that only flags the user gave override the file.
    a = p.add_argument
    a("--config", type=Path, help=f"TOML config file (default: {DEFAULT_CONFIG_PATH} if it exists)")
    a(
        "--listen",
        help="address of the gRPC and metrics servers (default 127.0.0.1; other addresses need "
        "--auth-token-file or mTLS, else a warning)",
    )
    a("--metrics-listen", help="address of the metrics server when it differs from --listen (default: --listen)")
    a("--port", type=_port, help="gRPC port (default 1778; 0 picks a free one and logs it)")
    a("--metrics-port", type=_port, help="Prometheus /metrics HTTP port (default 9778; 0 disables)")
    a(
        "--gpu-backend",
        choices=GPU_BACKENDS,
        help="auto: NVML if a driver is present, else the GPU sampler "
        "reports unavailable; sim: N simulated GPUs (labelled simulated) for machines without GPUs; none: no GPU "
        "sampling (default auto)",
    )
    a("--sim-gpus", type=_count, help="number of simulated GPUs with --gpu-backend sim (default 8)")
    a("--interval-s", type=_positive_float, help="sampling interval in seconds (default 1)")
    a("--history-s", type=_positive_float, help="how much sample history to keep in memory (default 3600)")
    a("--state-dir", type=Path, help="state directory (default /var/lib/dyno as root, else ~/.local/state/dyno)")
    a("--trace-dir", type=Path, help="where trace files are written (default /tmp/dyno-traces[-UID])")
    a(
        "--agent-socket",
        type=Path,
        help="Unix socket of the local Agent service (default /run/dyno/agent.sock "
        "as root, else $XDG_RUNTIME_DIR/dyno/agent.sock)",
    )
    a("--kineto-endpoint", help="abstract socket name for libkineto's daemon protocol (default dynolog; off disables)")
    a(
        "--kineto-socket-dir",
        type=Path,
        help="serve libkineto in filesystem-socket mode in DIR (trainers set KINETO_IPC_SOCKET_DIR=DIR)",
    )
    a(
        "--trace-retention-bytes",
        type=number(int, gt=0),
        help="delete the oldest finished traces while the trace dir holds more than this (default 10 GiB)",
    )
    a(
        "--trace-retention-s",
        type=_positive_float,
        help="delete finished traces older than this many seconds (default 604800, 7 days)",
    )
    a(
        "--auth-token-file",
        type=Path,
        help="file holding a shared bearer token required by StartTrace, CancelTrace and FetchTraceFile",
    )
    a("--tls-cert", type=Path, help="server certificate (PEM) for TLS")
    a("--tls-key", type=Path, help="server private key (PEM) for TLS")
    a("--tls-ca", type=Path, help="CA bundle (PEM): with it, clients must present certificates (mTLS)")
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
    if isinstance(default, bool) or isinstance(default, str):
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


def _validate(cfg: DaemonConfig) -> None:
    where = str(cfg.config_path) if cfg.config_path else "flags"
    # else gRPC's C core fails the bind late with "host must not be empty" (exit 1, not a config error)
    if not cfg.listen or any(c.isspace() for c in cfg.listen):
        raise ConfigError(f"{where}: listen must be a host name or address, not {cfg.listen!r}")
    if any(c.isspace() for c in cfg.metrics_listen):
        raise ConfigError(f"{where}: metrics_listen must be a host name or address, not {cfg.metrics_listen!r}")
    if cfg.gpu_backend not in GPU_BACKENDS:
        raise ConfigError(f"{where}: gpu_backend must be one of {', '.join(GPU_BACKENDS)}, not {cfg.gpu_backend!r}")
    if cfg.log_level not in LOG_LEVELS:
        raise ConfigError(f"{where}: log_level must be one of {', '.join(LOG_LEVELS)}")
    for key in ("port", "metrics_port"):
        if not 0 <= getattr(cfg, key) <= 65535:
            raise ConfigError(f"{where}: {key} out of range 0-65535")
    if cfg.port == cfg.metrics_port != 0 and (cfg.metrics_listen or cfg.listen) == cfg.listen:
        raise ConfigError(f"{where}: port and metrics_port are both {cfg.port}; give the metrics endpoint its own")
    if not 1 <= cfg.sim_gpus <= 64:
        raise ConfigError(f"{where}: sim_gpus must be 1-64")
    if not cfg.interval_s > 0 or not cfg.history_s > 0:
        raise ConfigError(f"{where}: interval_s and history_s must be > 0")
    if cfg.history_s < cfg.interval_s:
        raise ConfigError(f"{where}: history_s ({cfg.history_s}) is shorter than interval_s ({cfg.interval_s})")
    if cfg.history_s / cfg.interval_s > 1_000_000:  # the ratio, not history_len: 1e300 printed 300 digits
        samples = cfg.history_s / cfg.interval_s
        raise ConfigError(f"{where}: history_s / interval_s = {samples:.6g} samples; at most 1000000")
    if cfg.trace_retention_bytes <= 0:  # 0 is no "unlimited": every finished trace went at the next pass
        raise ConfigError(f"{where}: trace_retention_bytes must be > 0 (there is no unlimited; give a size)")
    if not cfg.trace_retention_s > 0:  # else every finished trace is deleted at the next retention pass
        raise ConfigError(f"{where}: trace_retention_s must be > 0")
    _check_trace_dir(cfg, where)
    if bool(cfg.tls_cert) != bool(cfg.tls_key):
        raise ConfigError(f"{where}: tls_cert and tls_key must be given together")
    if cfg.tls_ca and not cfg.tls_cert:
        raise ConfigError(f"{where}: tls_ca needs tls_cert and tls_key")
    if not cfg.kineto_endpoint or "\0" in cfg.kineto_endpoint or "/" in cfg.kineto_endpoint:
        raise ConfigError(f"{where}: kineto_endpoint must be a plain name (or 'off')")


def resolve_config(args: argparse.Namespace, default_path: Path = DEFAULT_CONFIG_PATH) -> DaemonConfig:
    """Flags over file over defaults. Raises ConfigError for anything the user must fix."""
    values: dict[str, Any] = {}
    path: Path | None = args.config
    if path is None and default_path.exists():
        path = default_path
    if path is not None:
        for key, value in _read_file(path).items():
            values[key] = _coerce(key, value, str(path))
    for f in fields(DaemonConfig):
        flag_value = getattr(args, f.name, None)
        if f.name != "config_path" and flag_value is not None:
            values[f.name] = flag_value
    for key in ("listen", "metrics_listen"):  # "[::1]" as in a URL or gRPC target means the address ::1
        value = values.get(key)
        if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
            values[key] = value[1:-1]
    cfg = DaemonConfig(**values, config_path=path)
    _validate(cfg)
    return cfg

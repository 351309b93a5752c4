"""Resolving dynod's configuration: flags over the TOML file over defaults, each value checked, then the rules
between keys; a user mistake is a ConfigError naming where the value came from."""

from __future__ import annotations

import argparse
import difflib
import math
import os
import sys
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from dyno.daemon.config.settings import (
    DEFAULT_CONFIG_PATH,
    GPU_BACKENDS,
    INT_RANGES,
    KINETO_NAME,
    LOG_LEVELS,
    MAX_HISTORY_MAX_BYTES,
    MAX_INTERVAL_S,
    MAX_JOB_S,
    MAX_PERIODIC_INTERVAL_S,
    MAX_TRACE_RETENTION_BYTES,
    MAX_TRACE_RETENTION_S,
    MIN_HISTORY_MAX_BYTES,
    MIN_INTERVAL_S,
    MIN_JOB_FLUSH_S,
    MIN_JOB_RETENTION_BYTES,
    ConfigError,
    DaemonConfig,
    group_id,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = ["resolve_config"]

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


def _with_hint(key: str) -> str:
    """`key`, and the key probably meant: flags are spelled with '-' and keys with '_' (metrics-port)."""
    close = difflib.get_close_matches(key.replace("-", "_"), sorted(_FILE_KEYS), n=1, cutoff=0.75)
    return f"{key} (did you mean {close[0]}?)" if close else key


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            raw = f.read()
        # a UTF-8 byte order mark (some editors write one) is not TOML: tomllib would reject line 1, column 1
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
    if key in INT_RANGES and not INT_RANGES[key][0] <= value <= INT_RANGES[key][1]:
        return "{} {} is outside {}-{}".format(key, value, *INT_RANGES[key])
    if key in ("port", "metrics_port") and not 0 <= value <= 65535:
        return f"{key} out of range 0-65535"
    if key == "sim_gpus" and not 1 <= value <= 64:
        return "sim_gpus must be 1-64"
    if key == "interval_s" and not value >= MIN_INTERVAL_S:  # a shorter one would spin the sampling loop
        return (
            f"interval_s {value:g} is below the minimum of {MIN_INTERVAL_S:g} s (NVML updates its counters no faster)"
        )
    if key == "interval_s" and value > MAX_INTERVAL_S:
        return f"interval_s {value:g} is above the maximum of {MAX_INTERVAL_S:g} s"
    if key == "history_s" and not value > 0:
        return "history_s must be > 0"
    if key == "history_max_bytes" and not MIN_HISTORY_MAX_BYTES <= value <= MAX_HISTORY_MAX_BYTES:
        return f"history_max_bytes {value} is outside {MIN_HISTORY_MAX_BYTES}-{MAX_HISTORY_MAX_BYTES} (1 MiB-64 GiB)"
    if key == "trace_retention_bytes" and value <= 0:  # 0 is not "unlimited": it would delete every finished trace
        return "trace_retention_bytes must be > 0 (there is no unlimited; give a size)"
    if key == "trace_retention_bytes" and value > MAX_TRACE_RETENTION_BYTES:
        return f"trace_retention_bytes {value} is above the maximum of {MAX_TRACE_RETENTION_BYTES} (1 PiB)"
    if key == "trace_retention_s" and not value > 0:  # else every finished trace is deleted at the next pass
        return "trace_retention_s must be > 0"
    if key == "trace_retention_s" and value > MAX_TRACE_RETENTION_S:
        return f"trace_retention_s {value:g} is above the maximum of {MAX_TRACE_RETENTION_S:.0f} (10 years)"
    if key == "job_flush_s" and not MIN_JOB_FLUSH_S <= value <= MAX_JOB_S:
        return f"job_flush_s {value:g} is outside {MIN_JOB_FLUSH_S:g}-{MAX_JOB_S:.0f}"
    if key == "job_grace_s" and not 0 < value <= MAX_JOB_S:
        return f"job_grace_s {value:g} must be > 0 and at most {MAX_JOB_S:.0f}"
    if key == "job_retention_s" and not 0 < value <= MAX_TRACE_RETENTION_S:
        return f"job_retention_s {value:g} must be > 0 and at most {MAX_TRACE_RETENTION_S:.0f} (10 years)"
    if key == "analysis_timeout_s" and not 0 < value <= MAX_JOB_S:
        return f"analysis_timeout_s {value:g} must be > 0 and at most {MAX_JOB_S:.0f}"
    if key == "job_retention_bytes" and not MIN_JOB_RETENTION_BYTES <= value <= MAX_TRACE_RETENTION_BYTES:
        return f"job_retention_bytes {value} is outside {MIN_JOB_RETENTION_BYTES}-{MAX_TRACE_RETENTION_BYTES}"
    if key.startswith("periodic_"):
        return _periodic_problem(key, value)
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


def _periodic_problem(key: str, value: Any) -> str | None:
    """What is wrong with a periodic_* key's value on its own (dyno.daemon.profiling)."""
    if key == "periodic_interval_s" and not (value == 0 or 1 <= value <= MAX_PERIODIC_INTERVAL_S):
        return f"periodic_interval_s {value:g} must be 0 (off) or 1-{MAX_PERIODIC_INTERVAL_S:.0f}"
    if key == "periodic_budget" and not 0 < value <= 1:
        return f"periodic_budget {value:g} must be > 0 and at most 1 (a share of a job's time: 0.01 is 1%)"
    if key == "periodic_min_job_age_s" and not 0 <= value <= MAX_JOB_S:
        return f"periodic_min_job_age_s {value:g} is outside 0-{MAX_JOB_S:.0f}"
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
    if cfg.history_s / cfg.interval_s > 1_000_000:  # the ratio, not history_len: an int of 1e300 has 300 digits
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
    if cfg.periodic_interval_s and cfg.periodic_duration_ms >= cfg.periodic_interval_s * 1000:
        raise ConfigError(
            f"{where('periodic_duration_ms', 'periodic_interval_s')}: periodic_duration_ms "
            f"({cfg.periodic_duration_ms}) is not shorter than periodic_interval_s ({cfg.periodic_interval_s:g} s)"
        )
    if bool(cfg.tls_cert) != bool(cfg.tls_key):
        raise ConfigError(f"{where('tls_cert', 'tls_key')}: tls_cert and tls_key must be given together")
    if cfg.tls_ca and not cfg.tls_cert:
        raise ConfigError(f"{where('tls_ca')}: tls_ca needs tls_cert and tls_key")
    if cfg.kineto_socket_dir is not None and "kineto_endpoint" in sources and cfg.kineto_endpoint != KINETO_NAME:
        # Socket-dir mode serves libkineto's fixed name DIR/dynolog: another name, or "off", cannot be honoured.
        # "dynolog" itself (the default, as the shipped example file spells it) agrees.
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
    for f in fields(DaemonConfig):  # the defaults too: the default dirs come from $HOME and $XDG_*
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

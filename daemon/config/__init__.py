"""dynod configuration: flags over an optional TOML file over defaults, resolved once into a frozen dataclass."""

from dyno.daemon.config.flags import build_parser
from dyno.daemon.config.resolve import resolve_config
from dyno.daemon.config.settings import (
    AGENT_SOCKET_NAME,
    API_SOCKET_NAME,
    DEFAULT_CONFIG_PATH,
    DEFAULT_HISTORY_MAX_BYTES,
    EXIT_CODES,
    GPU_BACKENDS,
    KINETO_NAME,
    MAX_HISTORY_MAX_BYTES,
    MAX_INTERVAL_S,
    MAX_REGISTRY_CAP,
    MAX_TRACE_RETENTION_BYTES,
    MAX_TRACE_RETENTION_S,
    MIN_HISTORY_MAX_BYTES,
    MIN_INTERVAL_S,
    SYSTEM_RUNTIME_DIR,
    ConfigError,
    DaemonConfig,
    group_id,
)

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

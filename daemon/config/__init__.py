"""dynod configuration: flags over an optional TOML file over defaults, resolved once into a frozen dataclass.

The package's names are settings' public names (DaemonConfig, ConfigError, the bounds...) and the two steps that
make a config: build_parser and resolve_config."""

from dyno.daemon.config import settings
from dyno.daemon.config.flags import build_parser
from dyno.daemon.config.resolve import resolve_config
from dyno.daemon.config.settings import *  # noqa: F403

__all__ = ["build_parser", "resolve_config"]
__all__ += settings.__all__

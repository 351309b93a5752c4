"""dynod configuration as the tests build it: flags through the real parser, a config file in a temp dir."""

from __future__ import annotations

from pathlib import Path

from dyno.daemon.config import DaemonConfig, build_parser, resolve_config

NO_DEFAULT_FILE = Path("/nonexistent/dynod.toml")  # the tests never read the host's /etc/dyno/dynod.toml


def resolve(argv: list[str], default_path: Path = NO_DEFAULT_FILE) -> DaemonConfig:
    return resolve_config(build_parser().parse_args(argv), default_path=default_path)


def config_file(tmp_path: Path, text: str) -> str:
    f = tmp_path / "dynod.toml"
    f.write_text(text)
    return str(f)

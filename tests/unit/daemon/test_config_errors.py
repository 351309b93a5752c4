"""dynod config mistakes: each is a ConfigError (one line, exit 2), never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from dynod_config import resolve

from dyno.daemon.config import ConfigError

pytestmark = pytest.mark.unit


def test_a_config_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    f = tmp_path / "dynod.toml"
    f.write_bytes(b'listen = "\xff\xfe"\n')  # e.g. saved as Latin-1 or UTF-16 by an editor
    with pytest.raises(ConfigError, match=r"dynod.toml is not valid TOML: .*UTF-8"):
        resolve(["--config", str(f)])


@pytest.mark.parametrize(
    "content, message",
    [
        ("history_s = inf\n", "history_s must be a finite number"),
        ("interval_s = inf\n", "interval_s must be a finite number"),
        ("trace_retention_s = nan\n", "trace_retention_s must be a finite number"),
        ("trace_retention_s = -1\n", "trace_retention_s must be > 0"),
        ("trace_retention_s = 0\n", "trace_retention_s must be > 0"),
        ("trace_retention_bytes = -5\n", "trace_retention_bytes must be > 0"),
    ],
)
def test_durations_and_retention_in_the_file_are_checked(tmp_path: Path, content: str, message: str) -> None:
    f = tmp_path / "dynod.toml"
    f.write_text(content)
    with pytest.raises(ConfigError, match=message):
        resolve(["--config", str(f)])

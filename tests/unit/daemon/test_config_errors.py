"""dynod config mistakes: each is a ConfigError (one line, exit 2), never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from dynod_config import config_file, resolve

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
    f = config_file(tmp_path, content)
    with pytest.raises(ConfigError, match=message):
        resolve(["--config", f])


@pytest.mark.parametrize(
    "content, message",
    [
        ("analysis_enabled = 1\n", "analysis_enabled must be true or false"),
        ("analysis_timeout_s = 0\n", "analysis_timeout_s 0 must be > 0"),
        ("analysis_timeout_s = 100000\n", "at most 86400"),
        ("analysis_memory_mb = 64\n", "analysis_memory_mb 64 is outside 256-1048576"),
        ("analysis_queue = 0\n", "analysis_queue 0 is outside 1-1024"),
    ],
)
def test_the_analysis_keys_are_checked(tmp_path: Path, content: str, message: str) -> None:
    f = config_file(tmp_path, content)
    with pytest.raises(ConfigError, match=message):
        resolve(["--config", f])


def test_the_analysis_keys_from_flags_over_the_file(tmp_path: Path) -> None:
    f = config_file(tmp_path, "analysis_enabled = false\nanalysis_queue = 4\n")
    cfg = resolve(["--config", f, "--analysis-enabled", "--analysis-memory-mb", "512", "--analysis-timeout-s", "30"])
    assert (cfg.analysis_enabled, cfg.analysis_queue, cfg.analysis_memory_mb, cfg.analysis_timeout_s) == (
        True, 4, 512, 30.0)  # fmt: skip
    assert resolve(["--no-analysis-enabled"]).analysis_enabled is False

"""The periodic_* keys: off by default, flags over file, each value checked at start (one line, exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dynod_config import config_file, resolve

from dyno.daemon.config import ConfigError, DaemonConfig
from dyno.daemon.main import main
from dyno.daemon.profiling.setup import periodic_settings

pytestmark = pytest.mark.unit


def test_off_by_default() -> None:
    cfg = resolve([])
    assert cfg.periodic_interval_s == 0 and periodic_settings(cfg) is None
    assert (cfg.periodic_iterations, cfg.periodic_duration_ms, cfg.periodic_ranks_per_host) == (5, 3000, 1)
    assert cfg.periodic_budget == 0.01 and cfg.periodic_min_job_age_s == 300


def test_flags_over_file_into_settings(tmp_path: Path) -> None:
    f = config_file(tmp_path, "periodic_interval_s = 1800\nperiodic_budget = 0.02\nperiodic_iterations = 8\n")
    cfg = resolve(["--config", f, "--periodic-iterations", "3", "--periodic-min-job-age-s", "0.5"])
    s = periodic_settings(cfg)
    assert s is not None
    assert (s.interval_ms, s.budget, s.iterations, s.min_job_age_ms) == (1_800_000, 0.02, 3, 500)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("periodic_interval_s = 0.5\n", "periodic_interval_s 0.5 must be 0 \\(off\\) or 1-604800"),
        ("periodic_interval_s = -1\n", "periodic_interval_s -1 must be 0"),
        ("periodic_interval_s = 1e9\n", "periodic_interval_s 1e\\+09 must be 0"),
        ("periodic_budget = 0\n", "periodic_budget 0 must be > 0 and at most 1"),
        ("periodic_budget = 1.5\n", "periodic_budget 1.5 must be > 0 and at most 1"),
        ("periodic_budget = nan\n", "periodic_budget must be a finite number"),
        ("periodic_iterations = 0\n", "periodic_iterations 0 is outside 1-100000"),
        ("periodic_iterations = 2.5\n", "periodic_iterations must be an integer"),
        ("periodic_duration_ms = 0\n", "periodic_duration_ms 0 is outside 1-600000"),
        ("periodic_ranks_per_host = 0\n", "periodic_ranks_per_host 0 is outside 1-1024"),
        ("periodic_min_job_age_s = -1\n", "periodic_min_job_age_s -1 is outside 0-86400"),
        ("periodic_interval_s = 2\nperiodic_duration_ms = 2000\n", "periodic_duration_ms \\(2000\\) is not shorter"),
    ],
)
def test_bad_values_are_config_errors_naming_the_file(tmp_path: Path, content: str, message: str) -> None:
    f = config_file(tmp_path, content)
    with pytest.raises(ConfigError, match=message) as e:
        resolve(["--config", f])
    assert f in str(e.value)


def test_a_bad_flag_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as e:  # argparse's own check of the flag's type
        main(["--state-dir", str(tmp_path / "s"), "--periodic-budget", "0"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "dynod: error: argument --periodic-budget: must be > 0 and <= 1" in err and "Traceback" not in err


def test_the_defaults_are_the_dataclass_defaults() -> None:
    d = DaemonConfig()
    assert d.periodic_interval_s == 0.0 and d.periodic_budget == 0.01

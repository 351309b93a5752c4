"""The process registry's caps are configuration (max_processes, max_processes_per_uid): flags over the file over
DaemonConfig's defaults, each value checked where it came from, quoted in --help, passed to the registry."""

from __future__ import annotations

from pathlib import Path

import pytest
from dynod_config import config_file, resolve

from dyno.daemon.config import MAX_REGISTRY_CAP, ConfigError, DaemonConfig, build_parser
from dyno.daemon.registry import MAX_PROCESSES, MAX_PROCESSES_PER_UID
from dyno.daemon.tracing.subsystem import Tracing

pytestmark = pytest.mark.unit


def test_defaults_are_the_registrys_constants() -> None:
    cfg = resolve([])
    assert (cfg.max_processes, cfg.max_processes_per_uid) == (MAX_PROCESSES, MAX_PROCESSES_PER_UID) == (4096, 1024)


def test_flags_override_the_file_and_the_file_overrides_the_defaults(tmp_path: Path) -> None:
    path = config_file(tmp_path, "max_processes = 100\nmax_processes_per_uid = 10\n")
    cfg = resolve(["--config", path])
    assert (cfg.max_processes, cfg.max_processes_per_uid) == (100, 10)
    cfg = resolve(["--config", path, "--max-processes", "200", "--max-processes-per-uid", "20"])
    assert (cfg.max_processes, cfg.max_processes_per_uid) == (200, 20)


@pytest.mark.parametrize(
    "text, message",
    [
        ("max_processes = 0\n", "max_processes 0 is outside 1-65536"),
        ("max_processes_per_uid = 65537\n", "max_processes_per_uid 65537 is outside 1-65536"),
        ("max_processes = -1\n", "max_processes -1 is outside 1-65536"),
        ('max_processes = "4096"\n', "max_processes must be an integer"),
        ("max_processes_per_uid = 1.5\n", "max_processes_per_uid must be an integer"),
        ("max-processes = 10\n", "unknown key(s) max-processes (did you mean max_processes?)"),
    ],
)
def test_a_bad_file_value_is_an_error_naming_the_file_even_when_a_flag_overrides_it(
    tmp_path: Path, text: str, message: str
) -> None:
    path = config_file(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        resolve(["--config", path, "--max-processes", "10", "--max-processes-per-uid", "10"])
    assert str(e.value).endswith(message) and path in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("flag", ["--max-processes", "--max-processes-per-uid"])
@pytest.mark.parametrize("value", ["0", "65537", "many", "1.5"])
def test_a_bad_flag_is_a_usage_error(flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args([flag, value])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("dynod: error: argument " + flag) and repr(value) in err


def test_help_quotes_the_defaults_and_the_range(capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(build_parser().format_help().split())
    assert f"(default {DaemonConfig.max_processes}; 1-{MAX_REGISTRY_CAP};" in text
    assert f"(default {DaemonConfig.max_processes_per_uid}; 1-{MAX_REGISTRY_CAP};" in text


def test_tracing_builds_its_registry_with_the_configured_caps(tmp_path: Path) -> None:
    cfg = resolve(
        [
            "--trace-dir", str(tmp_path / "traces"), "--state-dir", str(tmp_path / "state"),
            "--agent-socket", str(tmp_path / "a.sock"), "--kineto-endpoint", "off",
            "--max-processes", "7", "--max-processes-per-uid", "3",
        ]
    )  # fmt: skip
    tracing = Tracing(cfg, "h")  # not started: nothing is bound
    assert (tracing.registry.max_processes, tracing.registry.max_per_uid) == (7, 3)

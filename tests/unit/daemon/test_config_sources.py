"""dynod config: every value checked where it came from (the file's even when a flag overrides it), errors that
name that source, and the lower bound on interval_s."""

from __future__ import annotations

from pathlib import Path

import pytest
from dynod_config import config_file, resolve

from dyno.daemon.config import MIN_INTERVAL_S, ConfigError
from dyno.daemon.main import main

pytestmark = pytest.mark.unit


def test_an_interval_below_the_minimum_is_refused_naming_value_and_minimum(tmp_path: Path) -> None:
    # --interval-s 0.000001 was accepted: the sampling loop would run back to back on a whole core
    with pytest.raises(ConfigError) as e:
        resolve(["--interval-s", "0.000001", "--history-s", "0.5"])
    assert str(e.value).startswith("--interval-s: interval_s 1e-06 is below the minimum of 0.1 s")
    f = config_file(tmp_path, "interval_s = 0.05\n")
    with pytest.raises(ConfigError, match=rf"^{f}: interval_s 0.05 is below the minimum of 0.1 s"):
        resolve(["--config", f])
    assert resolve(["--interval-s", str(MIN_INTERVAL_S)]).interval_s == MIN_INTERVAL_S


def test_dynod_exits_2_with_one_line_for_a_too_short_interval(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["--config", config_file(tmp_path, 'log_level = "info"\n'), "--interval-s", "0.000001"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "dynod: error: --interval-s: interval_s 1e-06 is below the minimum of 0.1 s (NVML updates its "
        "counters no faster)"
    ]


@pytest.mark.parametrize(
    "content, argv, message",
    [
        ("port = 70000\n", ["--port", "2000"], "port out of range 0-65535"),
        ('gpu_backend = "cuda"\n', ["--gpu-backend", "sim"], "gpu_backend must be one of"),
        ("interval_s = 0.001\n", ["--interval-s", "1"], "interval_s 0.001 is below the minimum"),
        ("sim_gpus = 0\n", ["--sim-gpus", "2"], "sim_gpus must be 1-64"),
        ("trace_retention_s = 0\n", ["--trace-retention-s", "60"], "trace_retention_s must be > 0"),
        ('trace_dir = "/tmp"\n', ["--trace-dir", "/tmp/dyno-x"], "trace_dir /tmp is a shared directory"),
        ('kineto_endpoint = "a/b"\n', ["--kineto-endpoint", "off"], "kineto_endpoint must be a plain name"),
        ('listen = ""\n', ["--listen", "127.0.0.1"], "listen must be a host name or address"),
    ],
)
def test_a_bad_file_value_is_reported_even_when_a_flag_overrides_it(
    tmp_path: Path, content: str, argv: list[str], message: str
) -> None:
    """A flag over a broken file value does not hide it: else the file would fail only at the first restart
    without the flag (a removed drop-in, a changed unit), far from the edit that broke it."""
    f = config_file(tmp_path, content)
    with pytest.raises(ConfigError) as e:
        resolve(["--config", f, *argv])
    assert str(e.value).startswith(f"{f}: ") and message in str(e.value)


def test_an_error_between_keys_names_where_each_came_from(tmp_path: Path) -> None:
    f = config_file(tmp_path, "history_s = 5\n")
    with pytest.raises(ConfigError, match=rf"^{f} and --interval-s: history_s \(5\) is shorter than interval_s \(10\)"):
        resolve(["--config", f, "--interval-s", "10"])
    # both from flags: the file (which sets neither) was blamed before
    f = config_file(tmp_path, "port = 2000\n")
    with pytest.raises(ConfigError, match=r"^--history-s and --interval-s: history_s \(0.5\) is shorter"):
        resolve(["--config", f, "--history-s", "0.5", "--interval-s", "1"])
    with pytest.raises(ConfigError, match=r"^--interval-s: history_s \(3600\) is shorter than interval_s \(7200\)"):
        resolve(["--interval-s", "7200"])


def test_a_pair_may_be_split_between_file_and_flags(tmp_path: Path) -> None:
    """The rules between keys apply to the resolved config: the file may leave one half of a pair to a flag."""
    f = config_file(tmp_path, 'tls_cert = "/etc/dyno/tls/server.crt"\ninterval_s = 10\nhistory_s = 5\n')
    cfg = resolve(["--config", f, "--tls-key", "/etc/dyno/tls/server.key", "--history-s", "60"])
    assert (cfg.tls_cert, cfg.tls_key) == (Path("/etc/dyno/tls/server.crt"), Path("/etc/dyno/tls/server.key"))
    assert (cfg.interval_s, cfg.history_s) == (10.0, 60.0)

"""Config resolution: flags over TOML over defaults, clear errors for user mistakes."""

from __future__ import annotations

from pathlib import Path

import pytest
from dynod_config import resolve

from dyno.daemon.config import ConfigError, DaemonConfig, build_parser

pytestmark = pytest.mark.unit


def test_defaults():
    cfg = resolve([])
    assert cfg == DaemonConfig()
    assert (cfg.listen, cfg.port, cfg.metrics_port, cfg.gpu_backend) == ("127.0.0.1", 1778, 9778, "auto")
    assert cfg.history_len == 3600
    assert cfg.config_path is None


def test_flags_override_file_override_defaults(tmp_path):
    f = tmp_path / "dynod.toml"
    f.write_text('port = 2000\ngpu_backend = "sim"\nsim_gpus = 4\ninterval_s = 2\ntrace_dir = "/tmp/x"\n')
    cfg = resolve(["--config", str(f), "--port", "3000"])
    assert cfg.port == 3000  # flag wins
    assert (cfg.gpu_backend, cfg.sim_gpus, cfg.interval_s) == ("sim", 4, 2.0)  # file
    assert cfg.trace_dir == Path("/tmp/x") and cfg.metrics_port == 9778  # file, default
    assert cfg.config_path == f
    assert cfg.history_len == 1800


def test_default_config_path_used_when_present(tmp_path):
    f = tmp_path / "dynod.toml"
    f.write_text("metrics_port = 0\n")
    assert resolve([], default_path=f).metrics_port == 0


@pytest.mark.parametrize(
    "content, message",
    [
        ("port = [1\n", "not valid TOML"),
        ("bogus = 1\n", "unknown key(s) bogus"),
        ('port = "x"\n', "port must be an integer"),
        ("port = 70000\n", "port out of range"),
        ('gpu_backend = "cuda"\n', "gpu_backend must be one of"),
        ("interval_s = 10\nhistory_s = 5\n", "shorter than interval_s"),
        ('tls_cert = "/a.pem"\n', "tls_cert and tls_key must be given together"),
        ("sim_gpus = 0\n", "sim_gpus must be 1-64"),
    ],
)
def test_file_errors_are_clear(tmp_path, content, message):
    f = tmp_path / "dynod.toml"
    f.write_text(content)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve(["--config", str(f)])


def test_unreadable_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        resolve(["--config", str(tmp_path / "nope.toml")])


@pytest.mark.parametrize(
    "argv", [["--port", "99999"], ["--interval-s", "-1"], ["--gpu-backend", "x"], ["--sim-gpus", "100"]]
)
def test_bad_flags_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    assert e.value.code == 2
    assert argv[0] in capsys.readouterr().err


def test_dcgm_metrics_is_a_boolean_key_and_flag(tmp_path):
    f = tmp_path / "dynod.toml"
    f.write_text("dcgm_metrics = true\n")
    assert resolve([]).dcgm_metrics is False
    assert resolve(["--config", str(f)]).dcgm_metrics is True
    assert resolve(["--config", str(f), "--no-dcgm-metrics"]).dcgm_metrics is False
    assert resolve(["--dcgm-metrics"]).dcgm_metrics is True
    f.write_text('dcgm_metrics = "yes"\n')
    with pytest.raises(ConfigError, match=r"dcgm_metrics must be true or false"):
        resolve(["--config", str(f)])

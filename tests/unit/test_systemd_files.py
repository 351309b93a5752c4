"""systemd/dynod.service and systemd/dynod.toml.example: parse, carry the required settings, verify clean."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.unit

SYSTEMD = Path(__file__).resolve().parents[2] / "systemd"
CONFIG_KEYS = {
    "listen",
    "port",
    "metrics_port",
    "gpu_backend",
    "sim_gpus",
    "interval_s",
    "history_s",
    "state_dir",
    "trace_dir",
    "agent_socket",
    "kineto_endpoint",
    "kineto_socket_dir",
    "log_level",
}


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(SYSTEMD / "dynod.service")
    return parser


def test_example_config_documents_every_key() -> None:
    text = (SYSTEMD / "dynod.toml.example").read_text()
    config = tomllib.loads(text)
    assert set(config) == CONFIG_KEYS
    assert config["gpu_backend"] == "auto" and config["port"] == 1778 and config["metrics_port"] == 9778
    for key in CONFIG_KEYS:  # each key has a comment right above it
        before = text.split(f"\n{key} = ", 1)[0]
        assert before.rstrip().splitlines()[-1].startswith("#"), key


def test_unit_settings() -> None:
    service = unit()["Service"]
    assert service["Type"] == "notify" and service["NotifyAccess"] == "main"
    assert service["ExecStart"] == "/usr/local/bin/dynod --config /etc/dyno/dynod.toml"
    assert service["Restart"] == "on-failure"
    assert service["ProtectSystem"] == "strict" and service["NoNewPrivileges"] == "yes"
    assert service["PrivateTmp"] == "no"
    for forbidden in ("PrivateNetwork", "PrivateDevices", "ProtectClock", "DevicePolicy"):
        assert forbidden not in service, f"{forbidden} would break kineto IPC or NVML"
    for limit in ("MemoryMax", "CPUQuota", "LimitNOFILE"):
        assert limit in service
    assert "/var/lib/dyno" in service["ReadWritePaths"] and "/run/dyno" in service["ReadWritePaths"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify_is_clean(tmp_path: Path) -> None:
    true = shutil.which("true")
    assert true is not None
    # verify checks that ExecStart's binary exists; point it at true(1) instead of an installed dynod
    text = (SYSTEMD / "dynod.service").read_text().replace("/usr/local/bin/dynod", true)
    path = tmp_path / "dynod.service"
    path.write_text(text)
    done = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "dynod.service" not in done.stderr, done.stderr  # no warnings about our unit

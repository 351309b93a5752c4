"""systemd/dynod.service and systemd/dynod.toml.example: parse, carry the required settings, verify clean."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from dyno.daemon.config import DaemonConfig, build_parser, resolve_config

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.unit

SYSTEMD = Path(__file__).resolve().parents[2] / "systemd"


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(SYSTEMD / "dynod.service")
    return parser


def test_example_config_documents_every_key_and_is_accepted() -> None:
    text = (SYSTEMD / "dynod.toml.example").read_text()
    config = tomllib.loads(text)
    commented = set(re.findall(r"^# (\w+) = ", text, flags=re.M))
    daemon_keys = {f.name for f in fields(DaemonConfig)} - {"config_path"}
    assert set(config) | commented == daemon_keys  # every key of the daemon's config, and no other
    for key in daemon_keys:  # each key is explained by the comment lines right above it
        before = re.split(rf"^(?:# )?{key} = ", text, maxsplit=1, flags=re.M)[0]
        assert before.rstrip().splitlines()[-1].startswith("#"), key
    # the daemon's own resolver accepts the file as shipped, and it matches the built-in defaults where it should
    cfg = resolve_config(build_parser().parse_args(["--config", str(SYSTEMD / "dynod.toml.example")]))
    assert cfg.gpu_backend == "auto" and cfg.port == 1778 and cfg.metrics_port == 9778
    defaults = DaemonConfig()
    for key in ("listen", "interval_s", "history_s", "kineto_endpoint", "trace_retention_bytes", "log_level"):
        assert getattr(cfg, key) == getattr(defaults, key), key
    assert cfg.kineto_socket_dir is None and cfg.auth_token_file is None


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
    # the analysis worker runs as the traced user and is killed past its timeout; its OOM kill never stops dynod
    assert {"CAP_SETUID", "CAP_SETGID", "CAP_KILL"} <= set(service["CapabilityBoundingSet"].split())
    assert service["OOMPolicy"] == "continue"


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


def test_a_config_error_is_not_restarted() -> None:
    """dynod exits 2 for configuration errors (daemon/main.py); retrying them only fills the journal."""
    assert unit()["Service"]["RestartPreventExitStatus"] == "2"

"""`dynod --help` says what docs/INSTALL_SYSTEMD.md's key table says (defaults and fallbacks, the nvml backend, the
interval minimum, kineto_endpoint with kineto_socket_dir); an explicit kineto endpoint together with a kineto socket
dir is a one-line configuration error (exit 2) from flags and file alike, while the defaults keep working; and
every path of the resolved config is absolute (what `dyno-cli status` prints comes from it)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from dyno.daemon.config import (
    KINETO_NAME,
    MAX_INTERVAL_S,
    MAX_TRACE_RETENTION_BYTES,
    MAX_TRACE_RETENTION_S,
    MIN_INTERVAL_S,
    ConfigError,
    DaemonConfig,
    build_parser,
    resolve_config,
)
from dyno.daemon.main import main

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def _help() -> str:
    return re.sub(r"\s+", " ", build_parser().format_help())


def _option_help(flag: str) -> str:
    action = next(a for a in build_parser()._actions if flag in a.option_strings)
    return re.sub(r"\s+", " ", action.help or "")


def _resolve(argv: list[str]) -> DaemonConfig:
    return resolve_config(build_parser().parse_args(argv), default_path=Path("/nonexistent/dynod.toml"))


def _table_row(key: str) -> str:
    text = (ROOT / "docs" / "INSTALL_SYSTEMD.md").read_text()
    return next(line for line in text.splitlines() if line.startswith(f"| `{key}` |"))


def test_agent_socket_help_gives_the_whole_fallback_chain_of_the_table() -> None:
    text = _option_help("--agent-socket")
    chain = ["/run/dyno/agent.sock as root", "$XDG_RUNTIME_DIR/dyno/agent.sock", "STATE_DIR/run/agent.sock"]
    assert all(part in text for part in chain), text
    assert text.index(chain[0]) < text.index(chain[1]) < text.index(chain[2])  # in the order they apply
    row = _table_row("agent_socket")
    assert all(p in row for p in ("/run/dyno/agent.sock", "$XDG_RUNTIME_DIR/dyno/agent.sock", "/run/agent.sock"))


def test_agent_socket_default_really_falls_back_to_the_state_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # root gets /run/dyno; the fallbacks are for other users
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", "/somewhere/state")
    cfg = DaemonConfig(state_dir=Path("/somewhere/state/dyno"))
    assert cfg.agent_socket_path == Path("/somewhere/state/dyno/run/agent.sock")


def test_state_dir_help_names_xdg_state_home() -> None:
    text = _option_help("--state-dir")
    assert "/var/lib/dyno as root" in text and "$XDG_STATE_HOME/dyno" in text and "~/.local/state/dyno" in text
    assert "$XDG_STATE_HOME/dyno" in _table_row("state_dir")


def test_gpu_backend_help_explains_nvml_as_the_table_does() -> None:
    text = _option_help("--gpu-backend")
    assert "auto or nvml" in text and "never simulated" in text and "sim:" in text and "none:" in text
    assert "`auto` or `nvml`" in _table_row("gpu_backend")


def test_interval_bounds_are_stated() -> None:
    assert f"{MIN_INTERVAL_S:g}-{MAX_INTERVAL_S:g}" in _option_help("--interval-s")
    assert f"({MIN_INTERVAL_S:g}-{MAX_INTERVAL_S:g})" in _table_row("interval_s")


def test_kineto_help_says_endpoint_and_socket_dir_do_not_combine() -> None:
    endpoint, socket_dir = _option_help("--kineto-endpoint"), _option_help("--kineto-socket-dir")
    assert "Not used with --kineto-socket-dir" in endpoint and "configuration error" in endpoint
    assert f"DIR/{KINETO_NAME}" in socket_dir and "KINETO_IPC_SOCKET_DIR=DIR" in socket_dir
    assert "configuration error" in _table_row("kineto_socket_dir")


def test_help_states_exit_codes() -> None:
    assert "Exit codes: 0 stopped cleanly" in _help() and "2 configuration error" in _help()


# --- --kineto-endpoint with --kineto-socket-dir ------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ["off", "myname"])
def test_an_explicit_endpoint_with_a_socket_dir_is_a_configuration_error(endpoint: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        _resolve(["--kineto-endpoint", endpoint, "--kineto-socket-dir", str(tmp_path / "k")])
    message = str(e.value)
    assert message.startswith("--kineto-endpoint and --kineto-socket-dir: ")
    assert f"kineto_endpoint {endpoint!r} conflicts with kineto_socket_dir" in message


def test_the_conflict_is_found_in_the_file_and_across_file_and_flag(tmp_path: Path) -> None:
    f = tmp_path / "dynod.toml"
    f.write_text(f'kineto_endpoint = "off"\nkineto_socket_dir = "{tmp_path / "k"}"\n')
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(f))}: kineto_endpoint 'off' conflicts"):
        _resolve(["--config", str(f)])
    f.write_text('kineto_endpoint = "other"\n')
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(f))} and --kineto-socket-dir: kineto_endpoint 'other'"):
        _resolve(["--config", str(f), "--kineto-socket-dir", str(tmp_path / "k")])


def test_defaults_and_the_name_socket_dir_mode_serves_keep_working(tmp_path: Path) -> None:
    k = tmp_path / "k"
    assert _resolve(["--kineto-socket-dir", str(k)]).kineto_socket_dir == k  # the default endpoint: no conflict
    cfg = _resolve(["--kineto-endpoint", KINETO_NAME, "--kineto-socket-dir", str(k)])  # what DIR/dynolog is named
    assert cfg.kineto_socket_dir == k and cfg.kineto_endpoint == KINETO_NAME
    assert _resolve(["--kineto-endpoint", "off"]).kineto_endpoint == "off"
    # the shipped example file sets kineto_endpoint = "dynolog": uncommenting its kineto_socket_dir must work
    example = (ROOT / "systemd" / "dynod.toml.example").read_text()
    f = tmp_path / "dynod.toml"
    f.write_text(example.replace('# kineto_socket_dir = "/run/dyno/kineto"', f'kineto_socket_dir = "{k}"'))
    parsed = build_parser().parse_args(["--config", str(f), "--state-dir", str(tmp_path / "s")])
    assert resolve_config(parsed).kineto_socket_dir == k


def test_dynod_exits_2_with_one_line_for_the_conflict(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    f = tmp_path / "dynod.toml"
    f.write_text('log_level = "info"\n')
    assert main(["--config", str(f), "--kineto-endpoint", "off", "--kineto-socket-dir", str(tmp_path / "k")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynod: error: --kineto-endpoint and --kineto-socket-dir: ")


# --- absolute paths ------------------------------------------------------------------------------------------------


def test_relative_paths_are_made_absolute_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "dynod.toml").write_text('trace_dir = "traces"\n')
    cfg = _resolve(
        [
            "--config",
            "conf/dynod.toml",
            "--state-dir",
            "state",
            "--agent-socket",
            "run/a.sock",
            "--kineto-socket-dir",
            "k",
        ]
    )
    assert cfg.trace_dir == tmp_path / "traces" and cfg.state_dir == tmp_path / "state"
    assert cfg.agent_socket_path == tmp_path / "run" / "a.sock" and cfg.kineto_socket_dir == tmp_path / "k"
    assert cfg.config_path == tmp_path / "conf" / "dynod.toml"
    for value in (cfg.trace_dir, cfg.state_dir, cfg.agent_socket_path, cfg.kineto_socket_dir, cfg.config_path):
        assert value is not None and value.is_absolute()


# --- upper bounds --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("interval_s", MAX_INTERVAL_S * 2, "is above the maximum of 86400 s"),
        ("trace_retention_s", MAX_TRACE_RETENTION_S + 1, "is above the maximum of 315360000 (10 years)"),
        ("trace_retention_bytes", MAX_TRACE_RETENTION_BYTES + 1, "is above the maximum of 1125899906842624 (1 PiB)"),
    ],
)
def test_values_above_the_upper_bounds_are_configuration_errors(
    key: str, value: float, message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    flag = "--" + key.replace("_", "-")
    extra = ["--history-s", str(MAX_INTERVAL_S * 4)] if key == "interval_s" else []
    with pytest.raises(ConfigError, match=rf"^{flag}: {key} .*{re.escape(message)}"):
        _resolve([flag, str(value), *extra])
    f = tmp_path / "dynod.toml"
    f.write_text(f"{key} = {value!r}\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(f))}: {key} .*{re.escape(message)}"):
        _resolve(["--config", str(f)])
    assert main([flag, str(value), *extra]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1
    _resolve([flag, str(int(value) // 2 if key == "trace_retention_bytes" else value / 2), *extra])  # in range: fine

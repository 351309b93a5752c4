"""dynod settings an operator gets wrong, or writes the way other tools accept: each a clear one-line ConfigError
(exit 2) or the obvious meaning, never a late bind failure from gRPC's C core (exit 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dynod_config import config_file, resolve

from dyno.daemon.config import ConfigError, build_parser

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("value", ["", "  ", "a b"])
def test_an_empty_or_blank_listen_address_is_a_config_error(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match="listen"):
        resolve(["--config", config_file(tmp_path, f'listen = "{value}"\n')])
    with pytest.raises(ConfigError, match="listen"):
        resolve(["--listen", value])
    with pytest.raises(ConfigError, match="metrics_listen"):
        resolve(["--config", config_file(tmp_path, 'metrics_listen = "a b"\n')])


def test_bracketed_ipv6_listen_addresses_mean_the_address(tmp_path: Path) -> None:
    # gRPC accepted "[::1]" while the metrics server could not resolve it ("Name or service not known", exit 1)
    cfg = resolve(["--config", config_file(tmp_path, 'listen = "[::1]"\nmetrics_listen = "[::]"\n')])
    assert (cfg.listen, cfg.metrics_listen) == ("::1", "::")


def test_metrics_listen_has_a_flag_like_every_other_key(tmp_path: Path) -> None:
    # the docs say every key is a flag name; metrics_listen was file-only
    cfg = resolve(["--config", config_file(tmp_path, 'metrics_listen = "127.0.0.1"\n'), "--metrics-listen", "0.0.0.0"])
    assert cfg.metrics_listen == "0.0.0.0"


def test_a_huge_history_is_refused_in_one_short_line(tmp_path: Path) -> None:
    # the refusal printed history_s / interval_s as a 300-digit integer
    with pytest.raises(ConfigError) as e:
        resolve(["--config", config_file(tmp_path, "history_s = 1e300\n")])
    assert len(str(e.value)) < 200 and "1000000" in str(e.value)
    with pytest.raises(ConfigError) as e:
        resolve(["--interval-s", "1e-300"])
    assert len(str(e.value)) < 200


def test_zero_trace_retention_bytes_is_not_taken_for_unlimited(tmp_path: Path) -> None:
    # 0 often means "no limit"; here it deleted every finished trace within 30 s, before anyone fetched it
    with pytest.raises(ConfigError, match=r"trace_retention_bytes must be > 0 \(there is no unlimited"):
        resolve(["--config", config_file(tmp_path, "trace_retention_bytes = 0\n")])


def test_every_config_key_has_its_flag() -> None:
    """The docs and the example say every key is a flag name; metrics_listen and the trace retention keys were
    file-only, so a flag on the unit's ExecStart= line could not override them."""
    from dataclasses import fields

    from dyno.daemon.config import DaemonConfig

    flags = {a.dest for a in build_parser()._actions}
    assert {f.name for f in fields(DaemonConfig)} - {"config_path"} <= flags
    cfg = resolve(["--trace-retention-bytes", "1000", "--trace-retention-s", "60"])
    assert (cfg.trace_retention_bytes, cfg.trace_retention_s) == (1000, 60.0)


@pytest.mark.parametrize("shared", ["/tmp", "/tmp/", "/var/tmp", "/", "/dev/shm", "/home", "/var/lib", "/run"])
def test_a_shared_directory_is_refused_as_trace_dir(tmp_path: Path, shared: str) -> None:
    """Retention deletes every folder of the trace dir past trace_retention_s (or over the size), whoever made
    it: trace_dir = "/tmp" (natural, since libkineto writes below /tmp) had root dynod delete /tmp/.X11-unix and
    every user's week-old folder there."""
    with pytest.raises(ConfigError, match=r"trace_dir .* is a shared directory"):
        resolve(["--config", config_file(tmp_path, f'trace_dir = "{shared}"\n')])


def test_the_state_dir_is_refused_as_trace_dir(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"trace_dir .* holds the state_dir"):
        resolve(["--state-dir", str(tmp_path / "state"), "--trace-dir", str(tmp_path / "state")])
    with pytest.raises(ConfigError, match=r"trace_dir .* holds the state_dir"):
        resolve(["--state-dir", str(tmp_path / "state"), "--trace-dir", str(tmp_path)])
    cfg = resolve(["--state-dir", str(tmp_path / "state"), "--trace-dir", str(tmp_path / "traces")])
    assert cfg.trace_dir == tmp_path / "traces"


def test_a_config_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    # some editors (Notepad, PowerShell's Out-File) save UTF-8 with a BOM: it was "Invalid statement (line 1, col 1)"
    f = tmp_path / "dynod.toml"
    f.write_bytes(b'\xef\xbb\xbfport = 2000\r\nlisten = "0.0.0.0"\r\n')
    cfg = resolve(["--config", str(f)])
    assert (cfg.port, cfg.listen) == (2000, "0.0.0.0")


def test_the_same_port_for_grpc_and_metrics_is_a_config_error(tmp_path: Path) -> None:
    # it was found only after gRPC had bound the port: "cannot serve metrics ...: Address already in use", exit 1
    with pytest.raises(ConfigError, match="port and metrics_port are both 2000"):
        resolve(["--config", config_file(tmp_path, "port = 2000\nmetrics_port = 2000\n")])
    assert resolve(["--port", "0", "--metrics-port", "0"]).metrics_port == 0  # 0: any free port / disabled
    cfg = resolve(["--port", "2000", "--metrics-port", "2000", "--metrics-listen", "10.0.0.1", "--listen", "10.0.0.2"])
    assert cfg.port == cfg.metrics_port == 2000  # different addresses may share a port number


def test_an_unknown_key_names_the_key_meant(tmp_path: Path) -> None:
    # flags are spelled with '-', keys with '_': "metrics-port = 9000" only said "unknown key(s) metrics-port"
    with pytest.raises(ConfigError, match=r"unknown key\(s\) metrics-port \(did you mean metrics_port\?\)"):
        resolve(["--config", config_file(tmp_path, "metrics-port = 9000\n")])
    with pytest.raises(ConfigError, match=r"unknown key\(s\) interval \(did you mean interval_s\?\), zzz$"):
        resolve(["--config", config_file(tmp_path, "interval = 2\nzzz = 1\n")])

"""The host and auth options every host-level dyno-cli command shares (dyno.client.commands._hosts)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from dyno.client.cluster import HostResult
from dyno.client.commands._hosts import (
    add_host_arguments,
    client_auth,
    cluster_from_args,
    fanout_exit_code,
    hosts_from_args,
    print_failures,
    resolve_hosts,
    single_client,
)
from dyno.client.hosts import Host

pytestmark = pytest.mark.unit


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="dyno-cli x")
    add_host_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DYNO_HOST", "DYNO_PORT", "DYNO_AUTH_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)


def test_default_is_localhost() -> None:
    assert resolve_hosts(_parse()) == [Host("localhost", 1778)]


def test_environment_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DYNO_HOST", "gpu7")
    monkeypatch.setenv("DYNO_PORT", "1800")
    assert resolve_hosts(_parse()) == [Host("gpu7", 1800)]
    assert resolve_hosts(_parse("--hosts", "a")) == [Host("a", 1800)]  # DYNO_HOST only when nothing else is given


def test_sources_combine_in_order_without_duplicates(tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("c\nb:1779\n")
    args = _parse(
        "--host", "a", "--hosts", "b:1779,gpu[1-2]", "--hosts", "a", "--hostfile", str(hostfile), "--port", "1790"
    )
    assert resolve_hosts(args) == [
        Host("a", 1790),
        Host("b", 1779),
        Host("gpu1", 1790),
        Host("gpu2", 1790),
        Host("c", 1790),
    ]


def test_slurm_job_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    squeue = tmp_path / "squeue"
    squeue.write_text('#!/bin/sh\necho "node[3-4]"\n')
    squeue.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert hosts_from_args(_parse("--slurm-job", "12")) == [Host("node3"), Host("node4")]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--hosts", "gpu[1-"], "unclosed '['"),
        (["--hostfile", "/nonexistent/hosts"], "does not exist"),
        (["--host", "a:99999"], "outside 1-65535"),
    ],
)
def test_bad_hosts_are_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        resolve_hosts(_parse(*argv))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("dyno-cli: error: ") and message in err and err.count("\n") == 1


def test_bad_option_values_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--port", "0"], ["--timeout-s", "-1"], ["--max-concurrency", "0"]):
        with pytest.raises(SystemExit) as info:
            _parse(*argv)
        assert info.value.code == 2


def test_auth_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert client_auth(_parse()) is None
    token = tmp_path / "token"
    token.write_text("tok-0123456789abcdef\n")
    token.chmod(0o600)
    auth = client_auth(_parse("--auth-token-file", str(token)))
    assert auth is not None and auth.token == "tok-0123456789abcdef" and not auth.secure
    with pytest.raises(SystemExit) as info:
        client_auth(_parse("--auth-token-file", str(tmp_path / "missing")))
    assert info.value.code == 2 and "does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        client_auth(_parse("--tls-cert", str(token)))  # not a PEM, and no key


def test_cluster_and_single_client_from_args(capsys: pytest.CaptureFixture[str]) -> None:
    with cluster_from_args(_parse("--hosts", "a,b", "--timeout-s", "2", "--max-concurrency", "8")) as cluster:
        assert cluster.hosts == [Host("a"), Host("b")]
        assert cluster.deadline_s == 2 and cluster.max_concurrency == 8
    with single_client(_parse("--host", "a:1779")) as client:
        assert client.target == "a:1779"
    with pytest.raises(SystemExit) as info:
        single_client(_parse("--hosts", "a,b"))
    assert info.value.code == 2 and "one daemon" in capsys.readouterr().err


def test_fanout_exit_code_and_failure_lines(capsys: pytest.CaptureFixture[str]) -> None:
    ok = HostResult(Host("a"), True, value=1)
    bad = HostResult(Host("b", 1779), False, error="cannot reach dynod", error_type="Unavailable")
    assert fanout_exit_code([ok, ok]) == 0
    assert fanout_exit_code([ok, bad]) == 3
    assert fanout_exit_code([bad, bad]) == 1
    print_failures([ok, bad])
    assert capsys.readouterr().err == "dyno-cli: error: b:1779: cannot reach dynod (Unavailable)\n"

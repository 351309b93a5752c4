"""The host and auth options every host-level dyno-cli command shares (dyno.client.commands._hosts)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from dyno.client.cli import build_parser, main
from dyno.client.cli import main as cli_main
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
from dyno.client.hosts import Host, HostSpecError, parse_hosts, read_hostfile

from conftest import cli_help

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


# Empty option values are usage errors, not silent defaults, and a host name that does not resolve says so


def _usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    assert e.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("extra", [[], ["--hosts", "127.0.0.1:1"]])
def test_an_empty_host_is_a_usage_error_not_localhost(capsys: pytest.CaptureFixture[str], extra: list[str]) -> None:
    err = _usage_error(capsys, "status", "--host", "", *extra, "--timeout-s", "0.5")
    assert "--host: empty host name" in err
    assert "localhost" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["trace", "--job-id", "j", "--duration-ms", "100", "--output-dir", ""],
        ["fetch", "--trace-id", "t", "--output-dir", " "],
        ["trace", "--job-id", "j", "--duration-ms", "100", "--output-dir", "x", "--html", ""],
        ["status", "--hostfile", ""],
        ["status", "--tls-ca", ""],
        ["ps", "--auth-token-file", ""],
    ],
)
def test_an_empty_path_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], tmp_path
) -> None:
    monkeypatch.chdir(tmp_path)  # where an empty --output-dir wrote
    err = _usage_error(capsys, *argv, "--host", "127.0.0.1:1")
    assert "must not be empty" in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_repeated_host_adds_a_host() -> None:
    """`--host a --host b` calls both hosts."""
    args = build_parser().parse_args(["status", "--host", "127.0.0.1:1", "--hostname", "127.0.0.1:2"])
    assert [str(h) for h in hosts_from_args(args)] == ["127.0.0.1:1", "127.0.0.1:2"]


@pytest.mark.parametrize("spec", ["http://gpu7:1778", "grpc://gpu7:1778/", "gpu1,https://gpu7:1778"])
def test_a_url_is_named_a_url(spec: str) -> None:
    """A URL given as a host is named a URL, not read as an IPv6 literal."""
    with pytest.raises(HostSpecError) as e:
        parse_hosts(spec)
    assert "is a URL: give HOST[:PORT], e.g. gpu7:1778" in str(e.value) and "IPv6" not in str(e.value)


def test_dyno_host_errors_name_the_variable_and_a_list_works(monkeypatch: pytest.MonkeyPatch) -> None:
    """$DYNO_HOST takes a comma-separated list, and its errors name the variable."""
    args = build_parser().parse_args(["status"])
    monkeypatch.setenv("DYNO_HOST", "gpu1:1779,gpu[2-3]")
    assert [str(h) for h in hosts_from_args(args)] == ["gpu1:1779", "gpu2:1778", "gpu3:1778"]
    monkeypatch.setenv("DYNO_HOST", "bad host")
    with pytest.raises(HostSpecError, match=r"^\$DYNO_HOST: "):
        hosts_from_args(args)


def test_an_mpi_hostfile_is_read(tmp_path) -> None:
    """An Open MPI hostfile line ("node1 slots=8") is read as its host name."""
    f = tmp_path / "hosts"
    f.write_text("node1 slots=8\nnode[2-3]:1779 slots=8 max_slots=8  # rack 2\n")
    assert [str(h) for h in read_hostfile(f)] == ["node1:1778", "node2:1779", "node3:1779"]
    f.write_text("node1 node2\n")  # two names on a line stay an error: which one was meant?
    with pytest.raises(HostSpecError, match=":1: "):
        read_hostfile(f)


# A $DYNO_AUTH_TOKEN_FILE naming a missing or empty file: the error names the variable (no option named the file).


def test_the_variable_is_named(fake_dynod, tmp_path: Path, monkeypatch, capsys) -> None:
    missing = tmp_path / "token"
    monkeypatch.setenv("DYNO_AUTH_TOKEN_FILE", str(missing))
    with pytest.raises(SystemExit) as e:
        cli_main(["status", "--host", fake_dynod.target])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert f"$DYNO_AUTH_TOKEN_FILE: auth token file {missing} does not exist" in err, err
    assert "unset $DYNO_AUTH_TOKEN_FILE or pass --auth-token-file" in err


def test_the_option_given_is_not_blamed_on_the_variable(fake_dynod, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("DYNO_AUTH_TOKEN_FILE", str(tmp_path / "other"))
    missing = tmp_path / "token"
    with pytest.raises(SystemExit):
        cli_main(["status", "--host", fake_dynod.target, "--auth-token-file", str(missing)])
    err = capsys.readouterr().err
    assert f"dyno-cli: error: auth token file {missing} does not exist" in err and "$DYNO" not in err, err


def test_a_tls_file_named_like_the_token_file_is_not_blamed_on_the_variable(
    fake_dynod, tmp_path: Path, monkeypatch, capsys
) -> None:
    token = tmp_path / "token"
    token.write_text("a-token-of-enough-characters\n")
    token.chmod(0o600)
    monkeypatch.setenv("DYNO_AUTH_TOKEN_FILE", str(token))
    ca = tmp_path / "token.ca.pem"  # its name holds the token file's: the error is the CA's, not the variable's
    with pytest.raises(SystemExit):
        cli_main(["status", "--host", fake_dynod.target, "--tls-ca", str(ca)])
    err = capsys.readouterr().err
    assert f"TLS CA bundle {ca} does not exist" in err and "$DYNO" not in err, err


# The host options' help says an MPI hostfile works


def test_hostfile_help_says_an_mpi_hostfile_works() -> None:
    text = cli_help("status")
    assert "further words ignored (an MPI hostfile's 'node1 slots=8' works)" in text

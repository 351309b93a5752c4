"""Empty option values are usage errors, not silent defaults, and a host name that does not resolve says so.

Before: `--host ""` (e.g. `--host "$NODE"` with NODE unset) quietly meant localhost, alone or beside --hosts;
`--output-dir ""` wrote the trace into the current folder; `--hostfile ""` / `--tls-ca ""` complained about "."; a
mistyped host name got "cannot reach dynod (is it running and listening there?)"."""

from __future__ import annotations

import pytest

from dyno.client.cli import build_parser, main
from dyno.client.commands._hosts import hosts_from_args
from dyno.client.hosts import HostSpecError, parse_hosts, read_hostfile

pytestmark = pytest.mark.unit


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
    """Before: `--host a --host b` called only b (argparse kept the last --host)."""
    args = build_parser().parse_args(["status", "--host", "127.0.0.1:1", "--hostname", "127.0.0.1:2"])
    assert [str(h) for h in hosts_from_args(args)] == ["127.0.0.1:1", "127.0.0.1:2"]


@pytest.mark.parametrize("spec", ["http://gpu7:1778", "grpc://gpu7:1778/", "gpu1,https://gpu7:1778"])
def test_a_url_is_named_a_url(spec: str) -> None:
    """Before: "bad IPv6 address 'http://gpu7:1778'" (the colons read as an IPv6 literal)."""
    with pytest.raises(HostSpecError) as e:
        parse_hosts(spec)
    assert "is a URL: give HOST[:PORT], e.g. gpu7:1778" in str(e.value) and "IPv6" not in str(e.value)


def test_dyno_host_errors_name_the_variable_and_a_list_works(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: DYNO_HOST=a:1,b:2 failed with "bad IPv6 address 'a:1,b:2'" and no word of $DYNO_HOST."""
    args = build_parser().parse_args(["status"])
    monkeypatch.setenv("DYNO_HOST", "gpu1:1779,gpu[2-3]")
    assert [str(h) for h in hosts_from_args(args)] == ["gpu1:1779", "gpu2:1778", "gpu3:1778"]
    monkeypatch.setenv("DYNO_HOST", "bad host")
    with pytest.raises(HostSpecError, match=r"^\$DYNO_HOST: "):
        hosts_from_args(args)


def test_an_mpi_hostfile_is_read(tmp_path) -> None:
    """Before: "node1 slots=8" (Open MPI's hostfile format) was "bad host name 'node1 slots=8'"."""
    f = tmp_path / "hosts"
    f.write_text("node1 slots=8\nnode[2-3]:1779 slots=8 max_slots=8  # rack 2\n")
    assert [str(h) for h in read_hostfile(f)] == ["node1:1778", "node2:1779", "node3:1779"]
    f.write_text("node1 node2\n")  # two names on a line stay an error: which one was meant?
    with pytest.raises(HostSpecError, match=":1: "):
        read_hostfile(f)

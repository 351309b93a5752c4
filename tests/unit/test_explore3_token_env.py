"""A $DYNO_AUTH_TOKEN_FILE (set once in a profile, for every command) that names a missing or empty file failed even
`dyno-cli status` with "auth token file /x does not exist": no option on the command line named that file, so the
user could not tell where it came from. The error now names the variable. In process, with a real gRPC server."""

from __future__ import annotations

from pathlib import Path

import pytest

from dyno.client.cli import main as cli_main

pytestmark = pytest.mark.unit


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

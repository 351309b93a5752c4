"""An option a command does not know is that command's usage error: `dyno-cli status --foo` prints status's usage,
not the top-level one."""

from __future__ import annotations

import pytest

from dyno.client.cli import main as cli_main

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("command", ["status", "metrics", "ps", "version"])
def test_the_commands_own_usage_and_name(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli_main([command, "--foo", "bar"])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert f"usage: dyno-cli {command} [-h]" in err and "--host HOST" in err
    assert f"dyno-cli {command}: error: unrecognized arguments: --foo bar" in err
    assert "COMMAND ..." not in err


def test_an_option_before_the_command_is_still_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli_main(["--foo", "status"])
    assert "dyno-cli status: error: unrecognized arguments: --foo" in capsys.readouterr().err

"""dyno-cli argument parsing: options before the command move after it, nothing else is reordered; an option a
command does not know is that command's usage error."""

from __future__ import annotations

import pytest

from dyno.client.cli import command_first
from dyno.client.cli import main as cli_main

pytestmark = pytest.mark.unit

COMMANDS = ["status", "version", "metrics", "ps", "trace", "analyze"]


@pytest.mark.parametrize(
    "argv,expected",
    [
        (["--host", "h", "status"], ["status", "--host", "h"]),
        (
            ["--host", "h", "--port", "9", "trace", "--job-id", "trace"],
            ["trace", "--host", "h", "--port", "9", "--job-id", "trace"],
        ),
        (["status", "--host", "h"], ["status", "--host", "h"]),  # already in order
        (["--version"], ["--version"]),
        (["--help", "status"], ["--help", "status"]),
        (["--host", "h"], ["--host", "h"]),  # no command: argparse explains
        ([], []),
    ],
)
def test_command_first(argv: list[str], expected: list[str]) -> None:
    assert command_first(argv, COMMANDS) == expected


def test_os_errors_are_one_line_exit_1(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from dyno.client import cli

    def failing(args: argparse.Namespace) -> int:
        raise OSError(28, "No space left on device", "/data/traces/manifest.json")

    parser = argparse.ArgumentParser()
    parser.add_argument("command")
    parser.set_defaults(func=failing)
    monkeypatch.setattr(cli, "build_parser", lambda *_: parser)
    assert cli.main(["status"]) == 1
    assert capsys.readouterr().err == "dyno-cli: error: No space left on device: /data/traces/manifest.json\n"


# An option a command does not know is that command's usage error, with that command's usage.


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

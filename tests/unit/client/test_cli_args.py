"""dyno-cli argument order: options before the command move after it; nothing else is reordered."""

from __future__ import annotations

import pytest

from dyno.client.cli import command_first

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
    parser.set_defaults(func=failing)
    monkeypatch.setattr(cli, "build_parser", lambda *_: parser)
    assert cli.main([]) == 1
    assert capsys.readouterr().err == "dyno-cli: error: No space left on device: /data/traces/manifest.json\n"

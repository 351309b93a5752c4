"""Command lines that ask for --json: a usage error is also reported to the JSON reader, so that a tool reading
stdout gets a JSON error object, not only argparse's usage lines on stderr (dyno-cli's commands and analyze, each
with its own error schema)."""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections.abc import Callable, Sequence

from dyno import exit_codes

__all__ = ["json_requested", "parse_args_reporting"]


def json_requested(argv: Sequence[str]) -> bool:
    """Whether the command line asks for --json (options end at "--")."""
    words = list(argv)
    return "--json" in (words[: words.index("--")] if "--" in words else words)


def parse_args_reporting(
    parser: argparse.ArgumentParser, argv: Sequence[str], on_usage_error: Callable[[str], object]
) -> argparse.Namespace:
    """``parser.parse_args(argv)``; a usage error's message also goes to `on_usage_error`, before argparse's usage
    lines on stderr and its exit 2."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            args = parser.parse_args(argv)
    except SystemExit as e:
        if e.code == exit_codes.USAGE:
            last = said.getvalue().rstrip("\n").rsplit("\n", 1)[-1]
            on_usage_error(last.split(": error: ", 1)[-1])  # "dyno-cli status: error: MESSAGE"
        sys.stderr.write(said.getvalue())
        raise
    sys.stderr.write(said.getvalue())  # anything argparse said without failing
    return args

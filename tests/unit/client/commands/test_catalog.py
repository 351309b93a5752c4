"""The catalog of dyno-cli's commands: every command module, no other, and the top-level parser built from it
says what the parser of every command module says."""

from __future__ import annotations

import argparse
import pkgutil

import pytest

from dyno.client import commands
from dyno.client.cli import build_parser, top_level_parser
from dyno.client.commands._catalog import COMMANDS

pytestmark = pytest.mark.unit


def test_the_catalog_names_every_command_module() -> None:
    modules = {m.name for m in pkgutil.iter_modules(commands.__path__) if not m.name.startswith("_")}
    assert set(COMMANDS) == modules


def _subcommand_helps(parser: argparse.ArgumentParser) -> list[tuple[str, str | None]]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [(c.dest, c.help) for c in sub._choices_actions]


def test_the_top_level_parser_says_what_the_whole_parser_says() -> None:
    light, whole = top_level_parser(), build_parser()
    assert light.format_help() == whole.format_help()
    assert light.format_usage() == whole.format_usage()
    assert _subcommand_helps(light) == _subcommand_helps(whole) == list(COMMANDS.items())

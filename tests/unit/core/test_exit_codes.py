"""Exit codes: every code dynod, dyno-cli and each of its commands can return is in its --help, from one table
(dyno.exit_codes). Checked two ways: statically (each code the entry modules return, found in their source, is in
the tables of the commands that run that code) and by running the real commands against real loopback daemons
(the code each returns is in its help)."""

from __future__ import annotations

import argparse
import ast
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from dyno import exit_codes
from dyno.client.cli import build_parser, main
from dyno.client.commands import fetch, metrics, trace
from dyno.client.commands._hosts import FANOUT_EXIT_CODES
from dyno.daemon import config as dynod_config
from dyno.daemon.fake_server import FakeServer, start_fake_servers
from dyno.trace_analysis import cli as analyze_cli

from conftest import cli_help

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]

TABLES: dict[str, Mapping[int, str]] = {
    "status": FANOUT_EXIT_CODES,
    "version": FANOUT_EXIT_CODES,
    "ps": FANOUT_EXIT_CODES,
    "metrics": metrics.EXIT_CODES,
    "trace": trace.EXIT_CODES,
    "fetch": fetch.EXIT_CODES,
    "analyze": analyze_cli.EXIT_CODES,
    "dynod": dynod_config.EXIT_CODES,
}
CLI_COMMANDS = [c for c in TABLES if c != "dynod"]
HOST_COMMANDS = ["status", "version", "metrics", "ps", "trace", "fetch"]

# Which commands run each module's code (so each code the module returns must be in their tables).
MODULES: dict[str, list[str]] = {
    "client/cli.py": CLI_COMMANDS,
    "client/commands/_hosts.py": HOST_COMMANDS,
    "client/commands/status.py": ["status"],
    "client/commands/version.py": ["version"],
    "client/commands/ps.py": ["ps"],
    "client/commands/metrics.py": ["metrics"],
    "client/commands/trace.py": ["trace"],
    "client/commands/fetch.py": ["fetch"],
    "client/commands/_trace_flow.py": ["trace", "fetch"],
    "client/commands/_trace_options.py": ["trace", "fetch"],
    "client/commands/_trace_output.py": ["trace", "fetch"],
    "client/commands/_trace_render.py": ["trace", "fetch"],
    "client/trace/records.py": ["trace", "fetch"],
    "trace_analysis/cli.py": ["analyze"],
    "daemon/main.py": ["dynod"],
}

_CONSTANTS = {name: getattr(exit_codes, name) for name in ("OK", "FAILURE", "USAGE", "PARTIAL", "INTERRUPTED")}


def _folded(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _help(command: str) -> str:
    if command == "dynod":
        return _folded(dynod_config.build_parser().format_help())
    return cli_help(command)


def returned_codes(source: str) -> set[int]:
    """The exit codes a module's source returns: `return N` in a function annotated `-> int`, `SystemExit(N)`, and
    every dyno.exit_codes constant it names (`exit_codes.PARTIAL`, or `PARTIAL` imported from it)."""
    tree = ast.parse(source)
    imported = {
        alias.asname or alias.name: _CONSTANTS[alias.name]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "dyno.exit_codes"
        for alias in node.names
        if alias.name in _CONSTANTS
    }
    codes: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "exit_codes":
            if node.attr in _CONSTANTS:
                codes.add(_CONSTANTS[node.attr])
        elif isinstance(node, ast.Name) and node.id in imported:
            codes.add(imported[node.id])
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "SystemExit" and node.args:
            if isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, int):
                codes.add(node.args[0].value)
        elif isinstance(node, ast.FunctionDef) and isinstance(node.returns, ast.Name) and node.returns.id == "int":
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Constant):
                    if isinstance(ret.value.value, int) and not isinstance(ret.value.value, bool):
                        codes.add(ret.value.value)
    return codes


def test_the_scanner_finds_literal_and_named_codes() -> None:
    source = (
        "from dyno.exit_codes import PARTIAL as P\nfrom dyno import exit_codes\n"
        "def f() -> int:\n    return 7\n"
        "def g() -> str:\n    return 9\n"  # not an exit code: g returns no int
        "def h() -> None:\n    raise SystemExit(4)\n"
        "x = exit_codes.INTERRUPTED if P else 0\n"
    )
    assert returned_codes(source) == {7, 4, exit_codes.PARTIAL, exit_codes.INTERRUPTED}
    assert {1, 3} <= returned_codes((ROOT / "client/trace/records.py").read_text())  # trace_exit_code's literals
    assert exit_codes.INTERRUPTED in returned_codes((ROOT / "client/cli.py").read_text())
    assert {0, 1, 2, 3} <= returned_codes((ROOT / "client/commands/_hosts.py").read_text())  # fanout_exit_code


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_code_a_module_returns_is_in_the_help_of_each_command_running_it(module: str) -> None:
    codes = returned_codes((ROOT / module).read_text())
    for command in MODULES[module]:
        missing = codes - set(TABLES[command])
        assert not missing, f"{module} returns {missing}, not in `{command} --help`'s table"


@pytest.mark.parametrize("command", sorted(TABLES))
def test_each_help_states_its_table_and_argparse_usage_code(command: str) -> None:
    table = TABLES[command]
    assert exit_codes.USAGE in table  # argparse exits 2 on a bad command line, for every command
    assert _folded(exit_codes.describe(table)) in _help(command)


def test_dyno_cli_help_lists_every_code_any_command_returns() -> None:
    top = _folded(build_parser().format_help())
    assert _folded(exit_codes.describe(exit_codes.GENERAL)) in top
    used = {code for command in CLI_COMMANDS for code in TABLES[command]}
    assert used == set(exit_codes.GENERAL)  # 0, 1, 2, 3 and 130: nothing missing, nothing stale
    assert "3 partial" in top and "130 interrupted" in top


# --- the real commands, against real loopback daemons: the code each returns is in its help ----------------------


@pytest.fixture(scope="module")
def live() -> Iterator[FakeServer]:
    (server,) = start_fake_servers(1)
    yield server
    server.stop(0)


def _dead_target() -> str:
    (server,) = start_fake_servers(1)
    target = server.target
    server.stop(0)  # nothing listens there any more
    return target


def _run(command: str, argv: list[str]) -> int:
    try:
        code = main(argv)
    except SystemExit as e:  # argparse and usage_error
        code = int(e.code or 0)
    assert code in TABLES[command], f"{command} returned {code}, not in its --help"
    assert str(code) in _help(command)
    return code


@pytest.mark.parametrize("command", ["status", "version", "metrics", "ps"])
def test_fanout_commands_return_0_3_1_and_2_as_their_help_says(command: str, live: FakeServer) -> None:
    dead = _dead_target()
    opts = ["--timeout-s", "2"]
    assert _run(command, [command, "--host", live.target, *opts]) == exit_codes.OK
    assert _run(command, [command, "--hosts", f"{live.target},{dead}", *opts]) == exit_codes.PARTIAL
    assert _run(command, [command, "--host", dead, *opts]) == exit_codes.FAILURE
    assert _run(command, [command, "--hosts", "gpu[4-1]"]) == exit_codes.USAGE


def test_trace_and_fetch_return_codes_from_their_help(live: FakeServer, tmp_path: Path) -> None:
    dead = _dead_target()
    out = ["--output-dir", str(tmp_path), "--no-analyze", "--call-timeout-s", "2"]
    assert _run("trace", ["trace", "--host", dead, "--job-id", "nojob", "--duration-ms", "10", *out]) == 1
    assert _run("trace", ["trace", "--host", live.target, "--job-id", "j", "--iterations", "0", *out]) == 2
    assert _run("fetch", ["fetch", "--host", dead, "--trace-id", "t1", *out]) == exit_codes.FAILURE


def test_an_interrupt_is_130_for_every_command(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from dyno.client import cli

    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    real = cli.build_parser

    def parser_with_interrupts(names: list[str] | None = None) -> argparse.ArgumentParser:
        parser = real(names)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        for p in sub.choices.values():
            p.set_defaults(func=interrupted)
        return parser

    monkeypatch.setattr(cli, "build_parser", parser_with_interrupts)
    for command in ("status", "trace", "analyze"):
        argv = {"trace": ["--job-id", "j", "--duration-ms", "1", "--output-dir", "x"], "analyze": ["x"]}.get(
            command, []
        )
        assert _run(command, [command, *argv]) == exit_codes.INTERRUPTED
    assert "dyno-cli: interrupted" in capsys.readouterr().err


def test_analyze_failures_and_usage(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    assert _run("analyze", ["analyze", str(bad)]) == exit_codes.FAILURE
    assert _run("analyze", ["analyze"]) == exit_codes.USAGE
    capsys.readouterr()


def test_dynod_returns_2_for_a_configuration_error(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    from dyno.daemon.main import main as dynod_main

    code = dynod_main(["--config", str(tmp_path / "missing.toml")])
    assert code == exit_codes.USAGE and code in TABLES["dynod"]
    assert capsys.readouterr().err.startswith("dynod: error: cannot read config file")


def test_the_json_of_a_failed_trace_carries_an_exit_code_from_the_help(tmp_path: Path) -> None:
    """`--json`'s exit_code field is the process's: also one of the help's."""
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["fetch", "--host", _dead_target(), "--trace-id", "t2", "--output-dir", str(tmp_path), "--json"])
    doc = json.loads(buf.getvalue())
    assert code == exit_codes.FAILURE and doc["ok"] is False and code in TABLES["fetch"]

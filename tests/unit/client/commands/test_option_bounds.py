"""Every numeric dyno-cli option has an upper bound: a value beyond it is a usage error (exit 2, the option named)
and the range is in --help; `trace --pids` help says a process's own pid matches as well as its ancestors'."""

from __future__ import annotations

import argparse
import re

import pytest

from dyno.client.cli import build_parser, main
from dyno.client.cli import main as cli_main
from dyno.client.commands import trace as trace_cmd
from dyno.client.commands._trace_options import MAX_FETCH_CONCURRENCY, MAX_WAIT_S
from dyno.daemon.config import build_parser as dynod_parser

pytestmark = pytest.mark.unit

HUGE = ("99999999999999999999", "1e300")
# Bounded by the command's own check (a usage error naming the option and the bound), not by its argparse type.
CHECKED_IN_RUN = {("trace", "--start-delay-s")}


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _numeric(action: argparse.Action) -> bool:
    if action.type is None or not callable(action.type):
        return False
    try:
        return isinstance(action.type("1"), (int, float))
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return False


def _folded_help(command: str) -> str:
    return re.sub(r"\s+", " ", _commands()[command].format_help())


def test_every_numeric_option_refuses_huge_values() -> None:
    seen, unbounded = [], []
    for command, parser in _commands().items():
        for action in parser._actions:
            if not _numeric(action) or (command, action.option_strings[0]) in CHECKED_IN_RUN:
                continue
            seen.append(f"{command} {action.option_strings[0]}")
            for value in HUGE:
                try:
                    action.type(value)  # type: ignore[misc]
                except (argparse.ArgumentTypeError, ValueError):
                    continue
                unbounded.append(f"{command} {action.option_strings[0]} {value}")
    assert "trace --fetch-concurrency" in seen and "fetch --timeout-s" in seen  # the scan sees the options
    assert not unbounded, unbounded


@pytest.mark.parametrize("command", ["trace", "fetch"])
@pytest.mark.parametrize(
    "option, value, rule",
    [
        ("--fetch-concurrency", str(MAX_FETCH_CONCURRENCY + 1), f"must be 1-{MAX_FETCH_CONCURRENCY}"),
        ("--fetch-concurrency", "0", f"must be 1-{MAX_FETCH_CONCURRENCY}"),
        ("--fetch-concurrency", "100000000000", f"must be 1-{MAX_FETCH_CONCURRENCY}"),
        ("--timeout-s", str(MAX_WAIT_S + 1), "WAIT_RULE"),
        ("--timeout-s", "1e300", "WAIT_RULE"),
    ],
)
def test_beyond_the_bound_is_a_usage_error_naming_option_and_range(
    command: str, option: str, value: str, rule: str, tmp_path, capsys: pytest.CaptureFixture
) -> None:
    required = {"trace": ["--job-id", "j", "--duration-ms", "10"], "fetch": ["--trace-id", "t"]}[command]
    if rule == "WAIT_RULE":  # fetch takes 0 (what is done now); trace does not (it would cancel before the start)
        rule = f"must be 0-{MAX_WAIT_S:g}" if command == "fetch" else f"must be > 0 and <= {MAX_WAIT_S:g}"
    argv = [command, "--host", "127.0.0.1:1", *required, "--output-dir", str(tmp_path / "out"), option, value]
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"argument {option}: {rule}" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # nothing started, nothing made


@pytest.mark.parametrize("command", ["trace", "fetch"])
def test_help_lists_the_ranges(command: str) -> None:
    text = _folded_help(command)
    assert f"(default 8; 1-{MAX_FETCH_CONCURRENCY})" in text
    assert (f"(0-{MAX_WAIT_S:g})" if command == "fetch" else f"(> 0, at most {MAX_WAIT_S:g})") in text


def test_the_bounds_themselves_are_accepted() -> None:
    parser = build_parser(["trace"])
    args = parser.parse_args(
        ["trace", "--job-id", "j", "--duration-ms", "1", "--output-dir", "o", "--fetch-concurrency"]
        + [str(MAX_FETCH_CONCURRENCY), "--timeout-s", f"{MAX_WAIT_S:g}"]
    )
    assert args.fetch_concurrency == MAX_FETCH_CONCURRENCY and args.timeout_s == MAX_WAIT_S


def test_start_delay_beyond_its_bound_is_a_usage_error(tmp_path, capsys: pytest.CaptureFixture) -> None:
    argv = ["trace", "--host", "127.0.0.1:1", "--job-id", "j", "--duration-ms", "10", "--output-dir", str(tmp_path)]
    with pytest.raises(SystemExit) as e:
        main([*argv, "--start-delay-s", "1e300"])
    assert e.value.code == 2 and "--start-delay-s: must be 0-3600" in capsys.readouterr().err
    assert "at most 3600" in _folded_help("trace")


def test_pids_help_says_the_own_pid_matches_too() -> None:
    action = next(a for a in _commands()["trace"]._actions if "--pids" in a.option_strings)
    text = re.sub(r"\s+", " ", action.help or "")
    assert "whose own pid, or the pid of one of their ancestors" in text
    assert "a launcher's pid selects the launcher and its workers" in text


# Numeric options out of any sensible range (inf, 1e308, beyond the proto field's int32) are usage errors, exit 2
# with the option named, for dyno-cli and dynod.


_TRACE = ["trace", "--host", "127.0.0.1:1", "--job-id", "j", "--output-dir", "/nonexistent-explore2"]


@pytest.mark.parametrize(
    "argv, option",
    [
        (["status", "--host", "127.0.0.1:1", "--timeout-s", "inf"], "--timeout-s"),
        (["status", "--host", "127.0.0.1:1", "--timeout-s", "1e308"], "--timeout-s"),
        (["ps", "--host", "127.0.0.1:1", "--timeout-s", "-inf"], "--timeout-s"),
        ([*_TRACE, "--iterations", "99999999999"], "--iterations"),
        ([*_TRACE, "--duration-ms", "1" + "0" * 400], "--duration-ms"),  # an int too large for a float
        ([*_TRACE, "--duration-ms", "10", "--pids", "99999999999"], "--pids"),
        ([*_TRACE, "--duration-ms", "10", "--process-limit", "99999999999"], "--process-limit"),
        ([*_TRACE, "--iterations", "2", "--iteration-roundup", "99999999999"], "--iteration-roundup"),
        ([*_TRACE, "--duration-ms", "10", "--timeout-s", "inf"], "--timeout-s"),
        ([*_TRACE, "--duration-ms", "10", "--call-timeout-s", "inf"], "--call-timeout-s"),
        (["metrics", "--host", "127.0.0.1:1", "--json", "--limit", "99999999999999999999"], "--limit"),
        (["metrics", "--host", "127.0.0.1:1", "--json", "--since-ms", "99999999999999999999999"], "--since-ms"),
    ],
)
def test_dyno_cli_rejects_out_of_range_numbers(argv: list[str], option: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as e:
        cli_main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert f"argument {option}" in err and "Traceback" not in err


@pytest.mark.parametrize("option", ["--history-s", "--interval-s"])
@pytest.mark.parametrize("value", ["inf", "1e400"])
def test_dynod_rejects_infinite_durations(option: str, value: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as e:
        dynod_parser().parse_args([option, value])
    assert e.value.code == 2 and f"argument {option}: must be a finite number" in capsys.readouterr().err


def test_process_limit_zero_is_the_default_no_limit() -> None:
    parser = argparse.ArgumentParser()
    trace_cmd.register(parser.add_subparsers())
    args = parser.parse_args([*_TRACE, "--duration-ms", "10", "--process-limit", "0"])
    assert args.process_limit == 0 == parser.parse_args([*_TRACE, "--duration-ms", "10"]).process_limit

"""Numeric options out of any sensible range (inf, 1e308, beyond the proto field's int32) are usage errors, exit
2 with the option named, for dyno-cli and dynod; before, some crashed with a traceback deep in grpc or protobuf."""

from __future__ import annotations

import argparse

import pytest

from dyno.client.cli import main as cli_main
from dyno.client.commands import trace as trace_cmd
from dyno.daemon.config import build_parser as dynod_parser

pytestmark = pytest.mark.unit

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

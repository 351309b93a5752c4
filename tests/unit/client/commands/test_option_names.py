"""One name for the per-call deadline across commands: `--call-timeout-s` works on status, version, metrics and ps
too (trace and fetch have only that name, their --timeout-s being the overall wait), so a wrapper may pass it to
every command."""

from __future__ import annotations

import pytest

from dyno.client.cli import build_parser

pytestmark = pytest.mark.unit

_REQUIRED = {
    "trace": ["--job-id", "j", "--duration-ms", "1", "--output-dir", "o"],
    "fetch": ["--trace-id", "t", "--output-dir", "o"],
}


@pytest.mark.parametrize("command", ["status", "version", "metrics", "ps", "trace", "fetch"])
def test_call_timeout_s_is_every_commands_per_call_deadline(command: str) -> None:
    args = build_parser().parse_args([command, *_REQUIRED.get(command, []), "--call-timeout-s", "3"])
    assert args.call_timeout_s == 3.0


def test_status_timeout_s_is_still_the_per_call_deadline() -> None:
    assert build_parser().parse_args(["status", "--timeout-s", "2"]).call_timeout_s == 2.0

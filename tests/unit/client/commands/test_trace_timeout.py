"""`dyno-cli trace --timeout-s 0` is a usage error. Before: 0 quietly meant the default wait (start delay +
duration + 60 s), while `fetch --timeout-s 0` means "take what is done now": the same option read two ways."""

from __future__ import annotations

import pytest

from dyno.client.cli import build_parser

pytestmark = pytest.mark.unit


def test_trace_refuses_a_zero_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(
            ["trace", "--job-id", "j", "--duration-ms", "100", "--output-dir", "o", "--timeout-s", "0"]
        )
    assert e.value.code == 2
    assert "argument --timeout-s: must be > 0" in capsys.readouterr().err


def test_trace_without_a_timeout_leaves_it_to_the_default_and_fetch_takes_zero() -> None:
    parser = build_parser()
    args = parser.parse_args(["trace", "--job-id", "j", "--duration-ms", "100", "--output-dir", "o"])
    assert args.timeout_s is None  # default_wait_s() then decides
    args = parser.parse_args(["fetch", "--trace-id", "t", "--output-dir", "o", "--timeout-s", "0"])
    assert args.timeout_s == 0

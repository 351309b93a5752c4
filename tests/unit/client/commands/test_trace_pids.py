"""`dyno-cli trace --pids` takes pids as `dyno-cli ps` prints them (ANCESTRY: "4242,4240"), and a repeated
--pids adds to the list. Before: "4242,4240" was refused as "not an integer", and `--pids 1 --pids 2` quietly
traced only pid 2's processes (argparse kept the last occurrence)."""

from __future__ import annotations

import pytest

from dyno.client.cli import build_parser
from dyno.client.commands import trace

pytestmark = pytest.mark.unit

_BASE = ["trace", "--job-id", "j", "--duration-ms", "100", "--output-dir", "out"]


@pytest.mark.parametrize(
    ("words", "pids"),
    [
        (["--pids", "4242,4240"], [4242, 4240]),
        (["--pids", "4242", "4240"], [4242, 4240]),
        (["--pids", "1", "--pids", "2,3"], [1, 2, 3]),
        ([], []),
    ],
)
def test_pids_in_the_request(words: list[str], pids: list[int]) -> None:
    args = build_parser().parse_args([*_BASE, *words])
    assert list(trace._request(args, "t", 0.0, 0.0).pids) == pids


@pytest.mark.parametrize("word", ["1,x", "1,", "1,0", "-3"])
def test_a_bad_pid_in_a_list_is_a_usage_error(capsys: pytest.CaptureFixture[str], word: str) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args([*_BASE, f"--pids={word}"])
    assert e.value.code == 2
    assert "argument --pids" in capsys.readouterr().err

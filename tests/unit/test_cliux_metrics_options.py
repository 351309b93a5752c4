"""`metrics --limit` / `--since-ms` select samples for --json; the tables and --watch show the newest sample.
Before: `dyno-cli metrics --limit 10` printed one sample's table and `--watch --since-ms T` streamed from now, both
without a word that the option was ignored (and a --since-ms in the future printed "no samples yet")."""

from __future__ import annotations

import pytest

from dyno.client.cli import build_parser, main

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "argv",
    [
        ["--limit", "10"],
        ["--since-ms", "1000"],
        ["--watch", "--json", "--limit", "5"],
        ["--watch", "--since-ms", "1000"],
    ],
)
def test_history_options_without_json_are_usage_errors(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["metrics", "--host", "127.0.0.1:1", "--timeout-s", "0.5", *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "for --json without --watch" in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("words", "patterns"),
    [
        (["--names", "gpu_util*,cpu_user*"], ["gpu_util*", "cpu_user*"]),
        (["--names", "gpu_*", "--names", "load_*"], ["gpu_*", "load_*"]),
        (["--names", "gpu_[a,b]*"], ["gpu_[a,b]*"]),  # a comma inside [...] belongs to the pattern
    ],
)
def test_names_take_comma_separated_patterns(words: list[str], patterns: list[str]) -> None:
    """Before: "gpu_util*,cpu_user*" was one pattern, matching nothing ("no metric matches")."""

    assert build_parser().parse_args(["metrics", *words]).names == patterns


def test_an_empty_pattern_in_a_list_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["metrics", "--names", "gpu_*,", "--host", "127.0.0.1:1"])
    assert e.value.code == 2 and "each pattern must be 1-" in capsys.readouterr().err

"""`metrics --limit` / `--since-ms` select samples for --json; the tables and --watch show the newest sample.
Before: `dyno-cli metrics --limit 10` printed one sample's table and `--watch --since-ms T` streamed from now, both
without a word that the option was ignored (and a --since-ms in the future printed "no samples yet")."""

from __future__ import annotations

import pytest

from dyno.client.cli import main

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

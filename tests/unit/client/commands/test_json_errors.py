"""With --json, a command that fails before its own answer prints a JSON error object on stdout (schema
dyno.cli.error), as `analyze --json` does, besides the one line on stderr: a usage error or a failed
`metrics --watch --json` too, so a tool parsing stdout gets the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dyno.client.cli import ERROR_SCHEMA, main

pytestmark = pytest.mark.unit


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["status", "--json", "--port", "abc"], 2, "argument --port"),  # argparse
        (["--json", "metrics", "--watch", "--hosts", "127.0.0.1:1,127.0.0.1:2"], 2, "--watch follows one daemon"),
        (["metrics", "--json", "--watch", "--host", "127.0.0.1:1", "--timeout-s", "1"], 1, "cannot reach dynod"),
    ],
)
def test_a_failure_with_json_is_a_json_object_on_stdout(
    capsys: pytest.CaptureFixture[str], argv: list[str], code: int, says: str
) -> None:
    got, out, err = _run(capsys, *argv)
    assert got == code
    doc = json.loads(out)
    assert doc["schema"] == ERROR_SCHEMA and doc["ok"] is False and doc["exit_code"] == code
    assert says in doc["error"] and says in err  # the same reason on both


def test_an_existing_trace_folder_with_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "t1" / "x").mkdir(parents=True)
    argv = ["trace", "--host", "127.0.0.1:1", "--job-id", "j", "--duration-ms", "1", "--trace-id", "t1"]
    got, out, _ = _run(capsys, *argv, "--output-dir", str(tmp_path), "--json")
    assert got == 2 and "already exists and is not empty" in json.loads(out)["error"]


def test_without_json_stdout_stays_empty(capsys: pytest.CaptureFixture[str]) -> None:
    got, out, err = _run(capsys, "status", "--port", "abc")
    assert got == 2 and out == "" and "argument --port" in err

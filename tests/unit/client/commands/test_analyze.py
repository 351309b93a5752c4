"""`dyno-cli analyze`: with --json (and `python -m dyno.trace_analysis --json`) it always prints one JSON object on
stdout: the report, or, when the analysis fails or the command line is wrong, the error object of
docs/ANALYSIS_REPORT.md (schema dyno.trace_analysis.error); the exit code and the one stderr line stay as without
--json. Its --help is the trace_analysis description."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dyno.client.cli import main
from dyno.trace_analysis.cli import DESCRIPTION, ERROR_SCHEMA, EXIT_CODES, error_json

from conftest import cli_help

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[4]


def _cli(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _error_doc(out: str, code: int) -> dict:
    doc = json.loads(out)  # exactly one JSON document on stdout
    assert doc["schema"] == ERROR_SCHEMA and doc["version"] == 1
    assert doc["ok"] is False and doc["exit_code"] == code and doc["error"]
    return doc


def test_all_files_bad_prints_the_error_object_and_keeps_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "a.json").write_text("not json")
    with gzip.open(tmp_path / "b.json.gz", "wb") as f:
        f.write(b'{"traceEvents": [')  # truncated
    code, out, err = _cli(["analyze", "--json", str(tmp_path)], capsys)
    doc = _error_doc(out, 1)
    assert code == 1 and "no trace could be analysed" in doc["error"]
    assert err.count("\n") == 1 and err == f"dyno-cli: error: {doc['error']}\n"  # the same line as without --json
    code, out, err2 = _cli(["analyze", str(tmp_path)], capsys)
    assert code == 1 and out == "" and err2 == err  # without --json: nothing on stdout, as before


@pytest.mark.parametrize(
    "argv, code, says",
    [
        (["analyze", "--json"], 2, "give at least one trace file or folder"),  # no PATH: run_analyze's usage error
        (["analyze", "--json", "x.json", "--bogus"], 2, "unrecognized arguments: --bogus"),  # argparse's own
        (["analyze", "x.json", "--json", "--threshold"], 2, "expected one argument"),
        (["--json", "analyze", "x.json", "--rules"], 2, "expected one argument"),  # options before the command
    ],
)
def test_usage_errors_print_the_error_object_and_exit_2(
    argv: list[str], code: int, says: str, capsys: pytest.CaptureFixture
) -> None:
    got, out, err = _cli(argv, capsys)
    doc = _error_doc(out, code)
    assert got == code and says in doc["error"] and says in err
    assert "Traceback" not in err


def test_rule_and_threshold_failures_print_the_error_object(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "a", "ts": 0, "dur": 5, "pid": 1, "tid": 1}]}))
    code, out, _ = _cli(["analyze", "--json", str(trace), "--rules", "bogus"], capsys)
    assert code == 1 and "unknown rule 'bogus'" in _error_doc(out, 1)["error"]
    code, out, _ = _cli(["analyze", "--json", str(trace), "--html", str(trace)], capsys)
    assert code == 1 and "refusing to overwrite" in _error_doc(out, 1)["error"]
    code, out, _ = _cli(["analyze", "--json", str(trace)], capsys)  # success: the report, not an error object
    assert code == 0 and json.loads(out)["schema"] == "dyno.trace_analysis.report"


def test_other_commands_print_their_own_error_object(capsys: pytest.CaptureFixture) -> None:
    # every dyno-cli command does this, with its own schema (tests/unit/client/commands/test_json_errors.py)
    code, out, err = _cli(["status", "--json", "--bogus"], capsys)
    assert code == 2 and "unrecognized arguments" in err
    assert json.loads(out)["schema"] == "dyno.cli.error" and "unrecognized arguments" in json.loads(out)["error"]


def test_python_m_entry_point_prints_the_error_object(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dyno.trace_analysis", "--json", str(tmp_path / "missing.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "no such file" in _error_doc(proc.stdout, 1)["error"]
    proc = subprocess.run(
        [sys.executable, "-m", "dyno.trace_analysis", "--json", "--nope"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and "unrecognized arguments: --nope" in _error_doc(proc.stdout, 2)["error"]


def test_the_error_object_is_documented_with_its_fields() -> None:
    text = (ROOT / "docs" / "ANALYSIS_REPORT.md").read_text()
    section = re.search(r"^### Errors.*?(?=^## |\Z)", text, flags=re.M | re.S)
    assert section, "no '### Errors' section in ANALYSIS_REPORT.md"
    documented = json.loads(re.search(r"```json\n(.*?)```", section.group(0), flags=re.S).group(1))
    assert set(documented) == set(json.loads(error_json(1, "x")))
    assert documented["schema"] == ERROR_SCHEMA


# `dyno-cli analyze --help` says what `python -m dyno.trace_analysis --help` says (one description, ordered by
# severity), that --rules repeats, and that SIGTERM is an interruption (130)


def test_analyze_help_is_the_trace_analysis_description() -> None:
    text = cli_help("analyze")
    assert " ".join(DESCRIPTION.split()) in text
    assert "by severity, then time lost" in text


def test_analyze_help_says_rules_repeats_and_sigterm_is_130() -> None:
    text = cli_help("analyze")
    assert "--list-rules; repeatable" in text
    assert "SIGTERM" in EXIT_CODES[130] and "130 interrupted (Ctrl-C or SIGTERM)" in text

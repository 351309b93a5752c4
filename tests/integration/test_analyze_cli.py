"""The analysis as a process (`dyno-cli analyze`, `python -m dyno.trace_analysis`): a stdout reader that leaves
early (`... | head`) gives no traceback, and SIGTERM ends it as Ctrl-C does."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def _trace(tmp_path: Path) -> Path:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "pid": 1, "tid": 1, "ts": i * 10.0, "dur": 5.0}
        for i in range(200)
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _run(args: list[str], close_early: bool) -> tuple[int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "dyno.trace_analysis", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    if close_early:
        proc.stdout.close()  # the reader is gone before the report is written (imports alone take > 0.1 s)
        err = proc.stderr.read()
    else:
        proc.stdout.read()
        err = proc.stderr.read()
    return proc.wait(timeout=60), err


def test_closed_stdout_gives_no_traceback(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    code, err = _run([str(trace), "--html", str(tmp_path / "r.html")], close_early=True)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert code == 0
    assert (tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_open_stdout_still_reports_errors(tmp_path: Path) -> None:
    code, err = _run([str(tmp_path / "missing.json")], close_early=False)
    assert code == 1 and err.startswith("python -m dyno.trace_analysis: error: no trace could be analysed")


# SIGTERM ends an analysis as Ctrl-C does, exit 130 and no traceback, whether it runs as `dyno-cli analyze` or as
# `python -m dyno.trace_analysis` (both print the same exit codes in --help)


@pytest.mark.parametrize("module", ["dyno.trace_analysis", "dyno.client"])
def test_sigterm_while_reading_a_trace_exits_130(module: str) -> None:
    argv = [sys.executable, "-m", module] + (["analyze"] if module == "dyno.client" else []) + ["/dev/stdin"]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    # more than a pipe buffer holds: once written, the command is reading the trace (its handler is in place)
    proc.stdin.write(b'{"traceEvents": [' + b" " * (1 << 20))
    proc.stdin.flush()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)  # closes stdin too late to matter: the signal came first
    assert proc.returncode == 130, err.decode()
    assert b"Traceback" not in err

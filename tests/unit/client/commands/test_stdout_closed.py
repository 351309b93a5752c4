"""`dyno-cli fetch` (and `trace`, same flow) whose stdout reader has left (`... | grep -q straggler`, `| head`,
quitting `less`): the first table print met the closed pipe, and the BrokenPipeError ended the command at once with
exit 0, whatever had happened: a partial fetch exited 0 instead of 3, --html was never written, and the failed
hosts, the "still on the daemons" hint and the summary line never reached stderr. Now stdout is given up and the
command goes on: the --html report, every stderr line, and the documented exit code.
Real `python -m dyno.client` processes against fake daemons on free loopback ports."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fetch_cmd_fakes import PYTHON_M_DYNO_CLIENT, FakeDaemons, KnownTraceServicer

from conftest import dead_target

pytestmark = pytest.mark.unit

TRACE = "t-pipe"


class RealTraceServicer(KnownTraceServicer):
    """Serves a small trace the analysis loads (the fakes' own files have no event)."""

    def content(self, pid: int) -> bytes:
        op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": pid, "tid": pid, "ts": 0, "dur": 10}
        return json.dumps({"traceEvents": [op]}).encode()


@pytest.fixture
def daemons(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDaemons]:
    monkeypatch.setattr("fetch_cmd_fakes.KnownTraceServicer", RealTraceServicer)
    d = FakeDaemons()
    yield d
    d.stop()


def _run_with_stdout_closed(argv: list[str]) -> tuple[int, str]:
    """Run the CLI with its stdout a pipe whose reader has already left; (exit code, stderr)."""
    proc = subprocess.Popen(
        [*PYTHON_M_DYNO_CLIENT, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the command writes anything
    try:
        err = proc.stderr.read().decode()
        return proc.wait(timeout=60), err
    finally:
        proc.kill()
        proc.wait()


def test_partial_fetch_keeps_exit_3_html_and_stderr_when_stdout_is_closed(daemons, tmp_path: Path) -> None:
    known, _ = daemons.start({TRACE})
    unknown, _ = daemons.start(set())  # does not know the trace: a failed host
    html = tmp_path / "r.html"
    code, err = _run_with_stdout_closed(
        ["fetch", "--hosts", f"{known},{unknown}", "--trace-id", TRACE, "--output-dir", str(tmp_path / "out")]
        + ["--html", str(html), "--timeout-s", "30"]
    )
    assert code == 3, err
    assert html.is_file() and html.stat().st_size > 0, err
    assert f"{unknown}: no trace" in err
    assert "dyno-cli fetch: partial: 2 of 2 traced file(s) fetched, 1 of 2 host(s) ok" in err
    assert "analysis failed" not in err and "Traceback" not in err and "BrokenPipe" not in err
    manifest = json.loads((tmp_path / "out" / TRACE / "manifest.json").read_text())
    assert manifest["status"] == "partial" and manifest["exit_code"] == 3


def test_json_fetch_keeps_its_exit_code_when_stdout_is_closed(daemons, tmp_path: Path) -> None:
    unknown, _ = daemons.start(set())  # the only host does not know the trace: nothing fetched, exit 1
    code, err = _run_with_stdout_closed(
        ["fetch", "--host", str(unknown), "--trace-id", TRACE, "--output-dir", str(tmp_path / "out"), "--json"]
    )
    assert code == 1, err
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_status_across_hosts_keeps_exit_3_when_stdout_is_closed(daemons) -> None:
    alive, _ = daemons.start(set())
    dead = dead_target()
    code, err = _run_with_stdout_closed(["status", "--hosts", f"{alive},{dead}", "--timeout-s", "2"])
    assert code == 3, err
    assert f"dyno-cli: error: {dead}: cannot reach dynod" in err and "Traceback" not in err

"""SIGTERM ends an analysis as Ctrl-C does, exit 130 and no traceback, whether it runs as `dyno-cli analyze` or
as `python -m dyno.trace_analysis` (both print the same exit codes in --help). The trace comes through a pipe
that stays open (the loader reads a pipe whole), so the signal arrives while the command is waiting for it."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


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

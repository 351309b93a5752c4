"""`dyno-cli ... | head`: the reader going away is not an error (exit 0, nothing on stderr); its handler runs
before the generic OSError one."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

# dyno-cli whose `version` command prints far more than a pipe holds.
_NOISY_CLI = """
import sys
from dyno.client import cli
from dyno.client.commands import version

def noisy(args):
    for _ in range(20000):
        print("x" * 100)
    return 0

version.run = noisy
sys.exit(cli.main(["version"]))
"""


def test_a_closed_pipe_ends_quietly_with_exit_0() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _NOISY_CLI], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == "x" * 100 + "\n"
    proc.stdout.close()  # like `head -1`
    err = proc.stderr.read()
    assert proc.wait(30) == 0, err
    assert err == ""

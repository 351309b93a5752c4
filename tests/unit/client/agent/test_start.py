"""agent.start() on a running agent (e.g. started by dyno-run's bootstrap) returns it as is and says on stderr which
of its arguments were ignored and what to do instead. A real Python process with the agent started as the bootstrap
starts it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

_PROGRAM = """
import sys
from dyno.client import agent
first = agent.start(socket_path=sys.argv[1])  # as dyno-run's bootstrap: from the environment
assert agent.start() is first and agent.start(socket_path=sys.argv[1]) is first  # nothing new asked: no word
assert agent.start(job_id="from-env", rank=1) is first  # what the environment gave it already: no word either
assert agent.start(job_id="exp42", rank=3) is first
print("ok", flush=True)
"""


def test_ignored_arguments_of_a_second_start_are_said(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "DYNO_JOB_ID": "from-env", "RANK": "1", "HOME": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-c", _PROGRAM, str(tmp_path / "no-daemon.sock")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    warnings = [line for line in r.stderr.splitlines() if "already started" in line]
    assert len(warnings) == 1, r.stderr
    assert "job_id='exp42'" in warnings[0] and "rank=3" in warnings[0]
    assert "dyno-run --job-id" in warnings[0] and "DYNO_JOB_ID" in warnings[0]

"""dyno-run and Python's -I/-E/-S, which keep its bootstrap (a sitecustomize on PYTHONPATH) from running: the options
are found as Python reads them, in the command, behind `env` or in a script's #! line, and dyno-run warns on stderr
that the agent will not start, then runs the command as before. Real dyno-run and Python processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dyno.client.run import bootstrap_skipping_flags

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "command, flags",
    [
        (["python", "train.py"], []),
        (["python3", "-u", "train.py", "-I"], []),  # the script's own argument, not Python's
        (["python", "-I", "train.py"], ["-I"]),
        (["python3.11", "-Eu", "-m", "torch.distributed.run", "t.py"], ["-E"]),
        (["/usr/bin/python3", "-X", "dev", "-S", "t.py"], ["-S"]),
        (["python", "-Xfrozen_modules=off", "-W", "ignore", "-sI", "t.py"], ["-I"]),
        (["python", "-W", "-I", "t.py"], []),  # -I is -W's value here
        (["python", "-c", "-I"], []),
        (["python", "-Ic", "print(1)"], ["-I"]),
        (["python", "-m", "x", "-E"], []),
        (["python", "--check-hash-based-pycs", "always", "-E", "t.py"], ["-E"]),
        (["python", "-ISE", "t.py"], ["-I", "-S", "-E"]),
        (["/usr/bin/env", "A=1", "python3", "-I", "t.py"], ["-I"]),
        (["torchrun", "--nproc-per-node", "2", "-I"], []),  # not Python (no such script here)
        ([], []),
    ],
)
def test_bootstrap_skipping_flags(command: list[str], flags: list[str]) -> None:
    assert bootstrap_skipping_flags(command) == flags


@pytest.mark.parametrize(
    "shebang, flags",
    [
        ("#!/usr/bin/python3 -E", ["-E"]),
        ("#!/usr/bin/env -S python3 -I", ["-I"]),
        ("#!/usr/bin/env python3", []),
        ("#!/bin/sh", []),
    ],
)
def test_script_shebang_is_read(tmp_path: Path, shebang: str, flags: list[str]) -> None:
    script = tmp_path / "train"
    script.write_text(f"{shebang}\nprint('hi')\n")
    assert bootstrap_skipping_flags([str(script), "--lr", "1"]) == flags


# The agent starts once the process imports torch: a stand-in `torch` module (fake_torch() on PYTHONPATH) is enough.
PROBE = "import sys, torch; print('agent' if 'dyno.client.agent' in sys.modules else 'no agent'); sys.exit(3)"


def fake_torch(tmp_path: Path) -> str:
    (tmp_path / "fake_torch").mkdir(exist_ok=True)
    (tmp_path / "fake_torch" / "torch.py").write_text("")
    return str(tmp_path / "fake_torch")


def dyno_run(tmp_path: Path, *python_flags: str) -> subprocess.CompletedProcess[str]:
    # A socket no daemon listens on: the agent starts (its module is imported) and retries quietly.
    env = {
        **os.environ,
        "DYNO_AGENT_SOCKET": "/nonexistent/dyno-test/agent.sock",
        "PYTHONPATH": os.pathsep.join(p for p in (fake_torch(tmp_path), os.environ.get("PYTHONPATH", "")) if p),
    }
    return subprocess.run(
        [sys.executable, "-m", "dyno.client.run", "--", sys.executable, *python_flags, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


@pytest.mark.parametrize("flag", ["-I", "-E", "-S"])
def test_dyno_run_warns_when_the_agent_cannot_start(tmp_path: Path, flag: str) -> None:
    res = dyno_run(tmp_path, flag)
    assert res.stdout.strip() == "no agent" and res.returncode == 3  # it ran as before, without the agent
    assert f"dyno-run: warning: Python runs {flag} here" in res.stderr
    assert "the dyno agent will not start" in res.stderr


def test_dyno_run_is_quiet_when_the_agent_starts(tmp_path: Path) -> None:
    res = dyno_run(tmp_path, "-u")
    assert res.stdout.strip() == "agent" and res.returncode == 3
    assert "dyno-run: warning" not in res.stderr

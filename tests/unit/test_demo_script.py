"""scripts/demo.sh says what it does while it sets up: on a fresh machine it was silent for ~70 s (venv, pip
installing torch) before the demo's first line. Run in a copy of its folder layout with a stand-in python that
records each step, so nothing is installed."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]

# Stands in for python3 and, once `-m venv` has run, for .venv/bin/python: each step is a line on stdout.
_FAKE_PYTHON = """#!/usr/bin/env bash
case "$1 $2" in
  "-m venv") mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && echo "STEP venv" ;;
  "-c "*) [ -f .installed ] ;;
  "-m pip") touch .installed && echo "STEP pip" ;;
  "-m dyno.demo") echo "STEP demo" ;;
  *) exit 9 ;;
esac
"""


def _run(root: Path) -> subprocess.CompletedProcess[str]:
    fake = root / "fake-python"
    return subprocess.run(
        ["bash", str(root / "scripts" / "demo.sh")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHON": str(fake)},
    )


def test_each_set_up_step_is_announced_before_it_runs(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "demo.sh", tmp_path / "scripts" / "demo.sh")
    fake = tmp_path / "fake-python"
    fake.write_text(_FAKE_PYTHON)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)

    first = _run(tmp_path)
    assert first.returncode == 0, first.stderr
    said = first.stderr.splitlines()
    assert [line.split()[1] for line in said] == ["creating", "installing", "set-up"], said
    assert "about a minute" in said[1] and "torch" in said[1]
    assert first.stdout.split() == ["STEP", "venv", "STEP", "pip", "STEP", "demo"]

    again = _run(tmp_path)  # installed: a shorter note, no venv step
    assert again.returncode == 0, again.stderr
    assert [line.split()[1] for line in again.stderr.splitlines()] == ["updating", "set-up"]
    assert again.stdout.split() == ["STEP", "pip", "STEP", "demo"]

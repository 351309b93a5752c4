"""The project's own standards, checked in CI (STYLE.md): ruff lint, ruff format, mypy. Generated code excluded."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(
    shutil.which("ruff") is None and not (Path(sys.executable).parent / "ruff").exists(),
    reason="ruff (dev extra) not installed",
)
def test_ruff_lint_and_format():
    ruff = str(Path(sys.executable).parent / "ruff") if (Path(sys.executable).parent / "ruff").exists() else "ruff"
    lint = _run(ruff, "check", ".")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = _run(ruff, "format", "--check", ".")
    assert fmt.returncode == 0, "run `ruff format .`:\n" + fmt.stdout + fmt.stderr


def test_mypy():
    pytest.importorskip("mypy")
    # the whole dyno package as installed, so calls between its folders are checked too
    r = _run(sys.executable, str(REPO / "scripts" / "typecheck.py"))
    assert r.returncode == 0, r.stdout + r.stderr

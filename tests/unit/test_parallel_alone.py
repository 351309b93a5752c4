"""A test marked `alone` runs while no other test of a parallel run does (tests/conftest.py's locks): pytest with
two xdist workers in a subprocess, with the project's settings and conftest."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]

HEAD = """import os, time, pytest

def _run(name, seconds):
    with open(os.environ["ALONE_LOG"], "a") as f:
        f.write(f"{name} start {time.monotonic()}\\n")
    time.sleep(seconds)
    with open(os.environ["ALONE_LOG"], "a") as f:
        f.write(f"{name} end {time.monotonic()}\\n")

"""


def _others(first: int) -> str:
    return "".join(f"def test_other{i}():\n    _run('other{i}', 0.2)\n\n" for i in range(first, first + 6))


@pytest.mark.parametrize("marked", [True, False], ids=["alone", "unmarked"])
def test_an_alone_test_overlaps_no_other(tmp_path: Path, marked: bool) -> None:
    pytest.importorskip("xdist")
    shutil.copy(REPO / "tests" / "conftest.py", tmp_path / "conftest.py")
    mark = "@pytest.mark.alone\n" if marked else ""
    (tmp_path / "test_a.py").write_text(HEAD + _others(0))
    (tmp_path / "test_b.py").write_text(HEAD + f"{mark}def test_alone():\n    _run('alone', 1.0)\n\n" + _others(6))
    log = tmp_path / "log"
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(REPO / "pyproject.toml"),
         "--rootdir", str(tmp_path), "-n", "2", "--dist", "load", str(tmp_path)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "ALONE_LOG": str(log)},
    )  # fmt: skip
    assert "13 passed" in r.stdout, r.stdout + r.stderr
    spans: dict[str, dict[str, float]] = {}
    for line in log.read_text().splitlines():
        name, what, t = line.split()
        spans.setdefault(name, {})[what] = float(t)
    alone = spans.pop("alone")
    overlapping = [n for n, s in spans.items() if s["start"] < alone["end"] and s["end"] > alone["start"]]
    # two workers, 12 short tests beside the 1 s one: unmarked, some run during it
    assert (overlapping == []) is marked, (marked, overlapping)

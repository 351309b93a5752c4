"""tracefiles.single_trace_file: the one trace file a command line names (a file, or a folder holding exactly one),
without numpy; None for anything else (the load then finds what it is)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dyno.trace_analysis.tracefiles import single_trace_file, trace_paths

pytestmark = pytest.mark.unit


def test_a_file_or_a_folder_of_one_trace_file_names_it(tmp_path: Path) -> None:
    one = tmp_path / "one"
    (one / "host").mkdir(parents=True)
    f = one / "host" / "rank0.json.gz"
    f.write_bytes(b"")
    (one / "manifest.json").write_text("{}")  # not a trace
    (one / ".partial.json").write_text("{}")  # hidden: a download under way
    assert single_trace_file([str(f)]) == f
    assert single_trace_file([str(one)]) == f == trace_paths([str(one)])[0][0]  # as the load finds it


def test_anything_else_is_none(tmp_path: Path) -> None:
    two = tmp_path / "two"
    two.mkdir()
    (two / "a.json").write_text("{}")
    (two / "b.json").write_text("{}")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert single_trace_file([str(two)]) is None
    assert single_trace_file([str(empty)]) is None
    assert single_trace_file([str(two / "a.json"), str(two / "b.json")]) is None
    assert single_trace_file([]) is None


def test_it_imports_no_numpy() -> None:
    code = "import sys, dyno.trace_analysis.tracefiles; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_big_folder_is_walked_only_to_its_second_trace_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(50):
        sub = tmp_path / f"host{i:02d}"
        sub.mkdir()
        (sub / "rank.json").write_text("{}")
    walked: list[str] = []
    real = os.scandir

    def scandir(path: object) -> object:
        walked.append(str(path))
        return real(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", scandir)
    assert single_trace_file([str(tmp_path)]) is None
    assert len(walked) <= 3  # the top folder and the first two subfolders with a file, not 51 folders

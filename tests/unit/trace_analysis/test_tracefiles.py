"""tracefiles.single_trace_file: the one trace file a command line names (a file, or a folder holding exactly one),
without numpy; None for anything else (the load then finds what it is)."""

from __future__ import annotations

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

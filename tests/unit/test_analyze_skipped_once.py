"""A trace that cannot be loaded, among good ones, is named once: the text report lists it ("could not load"), so
stderr does not repeat it; with --json, stdout is for tools and the skipped file is named on stderr as well."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dyno.client.cli import main

pytestmark = pytest.mark.unit

_GOOD = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 50, "pid": 1, "tid": 1}]}


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "rank0.json").write_text(json.dumps(_GOOD))
    (tmp_path / "rank1.json").write_text('{"traceEvents": [')  # truncated
    return tmp_path


def test_text_report_names_the_bad_file_once(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["analyze", str(_folder(tmp_path))]) == 0
    out, err = capsys.readouterr()
    assert (out + err).count("rank1.json") == 1
    assert "could not load" in out and "rank1.json" in out


def test_json_report_names_the_bad_file_on_stderr_too(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["analyze", "--json", str(_folder(tmp_path))]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert any(e["path"].endswith("rank1.json") for e in doc["errors"])
    assert "skipped" in err and "rank1.json" in err

"""trace/fetch --html: the HTML report is written last, atomically; rendering it is part of the analysis, whose
problems are reported ("analysis failed (the traces are fine): ...") and never end dyno-cli with a traceback. Since
the write moved out of the analysis' try, an exception from render_html escaped: a traceback, and the errors, notes,
final status line and the --json answer of the trace were never printed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

import dyno.trace_analysis
import dyno.trace_analysis.report as report_mod
from dyno.client.commands._trace_render import analyze_files as _analyze

pytestmark = pytest.mark.unit


def test_an_html_rendering_error_is_an_analysis_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken_html(_report: Any) -> str:
        raise ValueError("a renderer bug")

    monkeypatch.setattr(dyno.trace_analysis, "analyze", lambda files: {"files": files})
    monkeypatch.setattr(report_mod, "render_json", lambda report, indent=False: '{"schema": "x"}')
    monkeypatch.setattr(report_mod, "render_html", broken_html)
    html = tmp_path / "report.html"
    args = argparse.Namespace(json=True, html=html)
    result, error = _analyze(args, [tmp_path / "rank0.json"])
    assert result == {"schema": "x"}  # the JSON report is kept
    assert error is not None and "ValueError: a renderer bug" in error
    assert not html.exists()

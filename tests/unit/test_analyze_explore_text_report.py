"""Text report layout on traces where every rule that did not run is merely not applicable."""

from __future__ import annotations

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_text

pytestmark = pytest.mark.unit


def test_not_applicable_rules_line_has_its_section(tmp_path):
    # CPU-only trace with shapes: the GPU rules and straggler are "not applicable", nothing else is skipped.
    # The "not applicable" line used to be appended to the last finding's fix, with no section header.
    b = TraceBuilder(record_shapes=True)
    for i in range(3):
        b.step(i, i * 1000.0, 1000.0)
        b.cpu("aten::item", i * 1000.0 + 10, 5.0)
    text = render_text(analyze(b.write(tmp_path / "cpu.json")))
    lines = text.splitlines()
    na = next(i for i, line in enumerate(lines) if "not applicable to these traces" in line)
    assert lines[na - 2 : na] == ["", "== rules that could not run =="]
    assert text.index("fix:") < text.index("== rules that could not run ==") < text.index("not applicable to")

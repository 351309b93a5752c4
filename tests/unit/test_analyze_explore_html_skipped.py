"""HTML 'Rules that did not run': the rules that are merely not applicable (GPU rules on a CPU-only trace, the
straggler rule on one rank) go on one line, as in the text report, instead of one table row per rule and rank
(a 300-rank CPU-only job listed 4,200 rows)."""

from __future__ import annotations

import re

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_html

pytestmark = pytest.mark.unit


def test_not_applicable_rules_on_one_line(tmp_path):
    for r in range(3):
        b = TraceBuilder(rank=r, world_size=3)  # CPU-only ranks, no shapes: unaligned-gemm is skipped for real
        for i in range(3):
            b.step(i, i * 1000.0, 1000.0)
            b.cpu("aten::mm", i * 1000.0 + 10.0, 50.0)  # a matmul whose shapes were not recorded
        b.write(tmp_path / f"rank-{r}.json")
    html = render_html(analyze(tmp_path))
    section = html[html.index("Rules that did not run") : html.index("<h2>Tables")]
    rows = re.findall(r"<tr><td>([^<]*)</td><td>(\d*)</td>", section)
    assert rows == [("unaligned-gemm", "0"), ("unaligned-gemm", "1"), ("unaligned-gemm", "2")]
    assert "not applicable (no GPU activity)" not in section
    line = re.search(r"Not applicable to these traces: ([^<]*)<", section)
    assert line is not None and "low-gpu-util" in line.group(1) and "exposed-comm" in line.group(1)

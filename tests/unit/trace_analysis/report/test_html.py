"""The HTML report: a multi-rank job's step-time chart draws everything inside the plot and tells every rank apart
(a legend entry and a colour each, past 8 ranks too, bars within the plot for hundreds of ranks); the rules that
are merely not applicable go on one line."""

from __future__ import annotations

import re
from xml.etree import ElementTree

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_html

pytestmark = pytest.mark.unit


def _job(folder, n_ranks, slow_rank=None):
    for r in range(n_ranks):
        b = TraceBuilder(rank=r, world_size=n_ranks)
        d = 160_000.0 if r == slow_rank else 100_000.0
        for i in range(3):
            b.step(i, i * d, d)
        b.write(folder / f"rank-{r}.json")
    return folder


def _step_svg(html):
    (svg,) = [s for s in re.findall(r"<svg.*?</svg>", html, re.S) if "step time per rank" in s]
    return ElementTree.fromstring(svg)


def _inside(svg):
    width = float(svg.get("width"))
    for el in svg.iter():
        tag = el.tag.rsplit("}", 1)[-1]
        if tag in ("rect", "text"):
            right = float(el.get("x")) + float(el.get("width", 0))
            assert right <= width + 0.5, (tag, el.get("x"), el.get("width"), width)


@pytest.mark.parametrize("n_ranks", [4, 12, 40])
def test_step_chart_stays_inside_the_plot(tmp_path, n_ranks):
    report = analyze(_job(tmp_path, n_ranks, slow_rank=n_ranks - 1))
    _inside(_step_svg(render_html(report)))


def test_many_ranks_show_one_bar_per_rank(tmp_path):
    svg = _step_svg(render_html(analyze(_job(tmp_path, 12, slow_rank=7))))
    titles = [t.text for t in svg.iter("title")]
    assert len(titles) == 12 and all(f"rank {r}:" in t for r, t in zip(range(12), titles, strict=True))
    assert "160.0 ms" in titles[7] and "100.0 ms" in titles[0]  # each rank's mean step time on hover


# HTML 'Rules that did not run': the merely not-applicable rules go on one line, as in the text report.


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

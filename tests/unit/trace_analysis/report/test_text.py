"""Text report layout on traces where every rule that did not run is merely not applicable."""

from __future__ import annotations

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_text
from dyno.trace_analysis.report.text import fmt_us

pytestmark = pytest.mark.unit


def test_not_applicable_rules_line_has_its_section(tmp_path):
    # CPU-only trace with shapes: the GPU rules and straggler are "not applicable", nothing else is skipped.
    # The "not applicable" line has its own section header, apart from the last finding's fix.
    b = TraceBuilder(record_shapes=True)
    for i in range(3):
        b.step(i, i * 1000.0, 1000.0)
        b.cpu("aten::item", i * 1000.0 + 10, 5.0)
    text = render_text(analyze(b.write(tmp_path / "cpu.json")))
    lines = text.splitlines()
    na = next(i for i, line in enumerate(lines) if "not applicable to these traces" in line)
    assert lines[na - 2 : na] == ["", "== rules that could not run =="]
    assert text.index("fix:") < text.index("== rules that could not run ==") < text.index("not applicable to")


@pytest.mark.parametrize(
    ("us", "text"),
    [
        (0.4, "0.4 µs"),
        (2.5, "2.5 µs"),
        (9.94, "9.9 µs"),
        (0.0, "0 µs"),
        (12.4, "12 µs"),
        (850.0, "850 µs"),
        (12_300.0, "12.3 ms"),
        (4_560_000.0, "4.56 s"),
        (-0.4, "-0.4 µs"),
    ],
)
def test_sub_10_us_durations_keep_a_decimal(us, text):
    # torch.profiler writes µs with 3 decimals: a 0.4 µs aten::zero_ prints "dur 0.4 µs", not "dur 0 µs"
    assert fmt_us(us) == text


def test_fix_texts_do_not_point_below_their_examples():
    # every renderer prints a finding's examples before its fix: "in the examples below" pointed at nothing
    from dyno.trace_analysis.rules import ALL_RULES

    for rule in ALL_RULES:
        for fix in {rule.fix, getattr(rule, "fix_single", ""), getattr(rule, "fix_zero", "")}:
            assert "examples below" not in fix, rule.id


def test_counts_of_one_are_singular(tmp_path):
    # "1 profiler steps", "1 .item() calls", "1 synchronous cudaMemcpy calls block": a trace with one step and one
    # of each problem
    import json
    import re

    from dyno.trace_analysis.report import render_html, render_json

    b = TraceBuilder()
    b.step(0, 0.0, 10_000.0)
    b.busy_gpu(0.0, 2)
    b.launch("k", 1_000.0, 1_300.0, 5.0, dur=250.0)  # a slow launch call
    b.runtime("cudaStreamSynchronize", 2_000.0, 50.0)
    b.cpu("aten::item", 3_000.0, 30.0)
    b.runtime("cudaMemcpyAsync", 3_002.0, 10.0)
    b.memcpy("Memcpy DtoH (Device -> Pageable)", 4_000.0, 4_010.0, 50.0, nbytes=4, dur=70.0, call="cudaMemcpy")
    b.cpu("aten::zeros", 5_000.0, 20.0)
    b.cpu("aten::to", 5_030.0, 10.0)
    b.memcpy("Memcpy HtoD (Pageable -> Device)", 5_031.0, 5_040.0, 5.0, nbytes=1 << 20)
    report = analyze(b.write(tmp_path / "t.json"))
    titles = {f.rule_id: f.title for f in report.findings}
    assert titles["sync-calls"] == (
        "1 CUDA synchronize call, 1 .item() call, 1 blocking copy to pageable host memory (.cpu()) "
        "in the 1 profiler step: host blocked 150 µs, GPU idle 150 µs caused by them (of 2.9 ms idle after them)"
    )
    assert titles["sync-memcpy"].startswith("1 synchronous cudaMemcpy call blocks the host for ")
    assert titles["slow-runtime-calls"].startswith("1 launch/copy runtime call took over 50 µs")
    assert titles["pageable-memcpy"].startswith("2 memory copies from/to pageable memory")
    assert titles["cpu-init-copy"] == "1 tensor filled on the CPU and then copied with .to()"
    text = render_text(report)
    assert "window 1 profiler step\n" in text and "(1 step from profiler step markers)" in text
    assert "1 profiler step</td>" in render_html(report)
    singular = re.compile(r"(?<![\d.,])1 (profiler steps|calls|copies|steps|tensors|launches|events|times|gaps)\b")
    assert not singular.search(text), singular.search(text)
    # the JSON window kind keeps its documented form "N profiler steps" (a value tools may parse)
    assert json.loads(render_json(report))["ranks"][0]["window"]["kind"] == "1 profiler steps"

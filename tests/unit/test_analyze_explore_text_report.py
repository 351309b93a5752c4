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
    # torch.profiler writes µs with 3 decimals: a 0.4 µs aten::zero_ used to print as "dur 0 µs"
    assert fmt_us(us) == text


def test_fix_texts_do_not_point_below_their_examples():
    # every renderer prints a finding's examples before its fix: "in the examples below" pointed at nothing
    from dyno.trace_analysis.rules import ALL_RULES

    for rule in ALL_RULES:
        for fix in {rule.fix, getattr(rule, "fix_single", ""), getattr(rule, "fix_zero", "")}:
            assert "examples below" not in fix, rule.id

"""Finding examples name a GPU row's stream, also on tables above the model's keep-gathered limit (65,536 rows), where
each column read returns a fresh array (``RuleContext.examples`` must not tell stream from tid by identity)."""

from __future__ import annotations

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze, events

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("keep_rows", [events._KEEP_GATHERED_ROWS, 0])  # 0: behave as a large trace
def test_kernel_examples_name_the_stream(tmp_path, monkeypatch, keep_rows):
    monkeypatch.setattr(events, "_KEEP_GATHERED_ROWS", keep_rows)
    b = TraceBuilder()
    t = 0.0
    for _ in range(20):  # launches of 5 µs for kernels of 2 µs on stream 9: all short
        b.launch("tiny_kernel", t, t + 6.0, 2.0, stream=9)
        for k in range(3):  # host ops: the stream column is mostly absent, so the model holds it sparse
            b.cpu("aten::add", t + 10.0 + 10 * k, 5.0)
        t += 50.0
    report = analyze(b.write(tmp_path / "t.json"), rules=["short-kernels"])
    (f,) = report.findings_of("short-kernels")
    assert [e.where for e in f.evidence.examples] == ["pid 0 stream 9"] * 3

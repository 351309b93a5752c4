"""CPU-op table: a call nested directly in a call of the same name (a dispatcher redispatch, e.g. aten::mean
inside aten::mean, aten::div_ inside aten::div_ in backward) is one call, as torch's key_averages counts it.
Counted twice, such ops showed twice their calls and twice their inclusive time (aten::mean 10 calls / 884 µs
for torch's 5 / 463 µs); self time was already right."""

from __future__ import annotations

import json

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis.analyses.cpu_ops import cpu_op_summary
from dyno.trace_analysis.loader import load_trace

pytestmark = pytest.mark.unit


def test_same_name_nesting_is_one_call(tmp_path):
    b = TraceBuilder()
    b.cpu("aten::mean", 0.0, 100.0)
    b.cpu("aten::mean", 10.0, 80.0)  # the redispatch
    b.cpu("aten::sum", 20.0, 30.0)
    b.cpu("aten::mean", 200.0, 40.0)  # a second, separate call
    s = cpu_op_summary(load_trace(b.write(tmp_path / "t.json")))
    by = {o.name: o for o in s.by_total}
    mean = by["aten::mean"]
    assert mean.count == 2 and mean.total_us == 140.0 and mean.max_us == 100.0 and mean.mean_us == 70.0
    assert mean.self_us == (100 - 80) + (80 - 30) + 40 and by["aten::sum"].self_us == 30.0
    assert mean.example_ts == 0.0  # the longest call starts at the outer call


def test_counts_match_torch_key_averages(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            model(torch.randn(8, 16)).square().mean().backward()
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    torch_count = {e.key: e.count for e in prof.key_averages()}
    ops = {e["name"] for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "cpu_op"}
    s = cpu_op_summary(load_trace(path), top_n=len(ops))
    got = {o.name: o.count for o in s.by_total}
    assert got["aten::mean"] == torch_count["aten::mean"] == 3
    assert got == {name: torch_count[name] for name in got}

"""The CPU-op table on traces of every shape: its self/total times and counts agree with torch's own
``key_averages()`` on a real trace (with stacks, shapes, memory and nested record_function), its shares stay
fractions 0..1 when threads run ops in parallel, and a redispatched call nested in one of its name is one call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.analyses.cpu_ops import cpu_op_summary
from dyno.trace_analysis.loader import load_trace
from dyno.trace_analysis.report.jsonout import render_json
from dyno.trace_analysis.report.text import render_text

pytestmark = pytest.mark.unit


def _threads_trace(path: Path, threads: int) -> Path:
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": name, "ts": 1000 + 100 * i + off, "dur": dur, "pid": 1, "tid": tid}
        for tid in range(1, threads + 1)
        for i in range(10)
        for name, off, dur in (("aten::linear", 0, 100), ("aten::mm", 10, 80))
    ]
    path.write_text(json.dumps({"traceEvents": ev}))
    return path


def test_parallel_threads_shares_are_of_the_cpu_op_time(tmp_path: Path) -> None:
    report = analyze(_threads_trace(tmp_path / "t.json", 4))
    (rank,) = report.ranks
    assert rank.window_us == pytest.approx(1000.0)  # the wall-clock window; 4 threads ran 4000 µs of ops in it
    assert rank.cpu_ops_share_of == "CPU-op time"
    shares = {r.name: r.share for r in rank.top_cpu_ops}
    assert shares == pytest.approx({"aten::mm": 0.8, "aten::linear": 0.2})  # of the 4000 µs, not of the window
    doc = json.loads(render_json(report))
    assert doc["ranks"][0]["cpu_ops_share_of"] == "CPU-op time"
    assert all(0.0 <= r["share"] <= 1.0 for r in doc["ranks"][0]["top_cpu_ops"])
    assert "share: self time of all CPU-op time, longer than the window" in render_text(report)


def test_one_thread_shares_stay_of_the_window(tmp_path: Path) -> None:
    report = analyze(_threads_trace(tmp_path / "t.json", 1))
    (rank,) = report.ranks
    assert rank.cpu_ops_share_of == "window"
    assert {r.name: r.share for r in rank.top_cpu_ops} == pytest.approx({"aten::mm": 0.8, "aten::linear": 0.2})
    assert "cpu_ops_share_of" not in json.loads(render_json(report))["ranks"][0]  # the JSON as before
    assert "share: self time of the window)" in render_text(report)


def test_cpu_op_table_agrees_with_key_averages(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    # one step first: its lazy imports run outside the profile. With with_stack=True, torch's Python tracer keeps
    # frame names as pointers into code objects, and a module's code object, freed once the import ran, left
    # undecodable names behind (UnicodeDecodeError in torch's own result parsing, pytorch/pytorch#186359)
    model(torch.randn(8, 32)).sum().backward()
    opt.step()
    opt.zero_grad()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True, with_stack=True) as prof:
        for _ in range(3):
            with record_function("outer"), record_function("inner \u00e9\u4e2d \U0001f680 " + "x" * 300):
                loss = model(torch.randn(8, 32)).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    ours = {o.name: o for o in cpu_op_summary(load_trace(path), top_n=10_000).by_total}
    checked = 0
    for e in prof.key_averages():
        if not e.key.startswith("aten::"):
            continue  # python functions and record_function ranges are not in the CPU-op table
        o = ours[e.key]
        assert o.count == e.count, e.key
        # the exported trace and key_averages round times differently: a small tolerance
        assert o.self_us == pytest.approx(e.self_cpu_time_total, abs=2.0, rel=0.02), e.key
        assert o.total_us == pytest.approx(e.cpu_time_total, abs=2.0, rel=0.02), e.key
        checked += 1
    assert checked >= 10


# CPU-op table: a call nested directly in a call of the same name (a dispatcher redispatch) is one call, as torch's
# key_averages counts it.


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

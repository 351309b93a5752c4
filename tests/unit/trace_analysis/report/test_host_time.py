"""Where a rank's host time in the window went (in CPU ops, other traced regions, nothing traced), and one count
of steps and optimizer calls in the summary and the findings: on builder traces and a real torch CPU run whose
steps sleep and spin in untraced Python."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis_trace_builder import TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_html, render_json, render_text

pytestmark = pytest.mark.unit


def _cpu_trace(tmp_path: Path) -> Path:
    # two 10 ms steps: ops 2 ms (an op nested in another counts once), a DataLoader __next__ annotation of 1 ms
    # outside ops, the rest untraced
    b = TraceBuilder(capability=None)
    for s in range(2):
        t0 = s * 10_000.0
        b.step(s, t0, 10_000.0)
        b.cpu("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t0 + 100.0, 1000.0, cat="user_annotation")
        b.cpu("aten::addmm", t0 + 2000.0, 2000.0)
        b.cpu("aten::empty", t0 + 2100.0, 10.0)
    return b.write(tmp_path / "cpu.json")


def test_host_time_split_of_a_cpu_trace(tmp_path: Path) -> None:
    report = analyze(_cpu_trace(tmp_path))
    h = report.to_dict()["ranks"][0]["host_time"]
    assert h["window_us"] == 20_000.0
    assert (h["ops_us"], h["other_traced_us"], h["untraced_us"]) == (4000.0, 2000.0, 14_000.0)
    assert h["ops_pct"] + h["other_traced_pct"] + h["untraced_pct"] == pytest.approx(100.0)
    text = render_text(report)
    assert "host time in the window (20.0 ms): CPU ops 20.0% (any thread), other traced regions 10.0%" in text
    assert "nothing traced 70.0% (Python between ops, sleeps, I/O," in text
    html = render_html(report)
    assert "rank 0: host time in the window (20.0 ms): CPU ops 20.0%" in html


def test_gpu_trace_text_keeps_its_summary(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(0, 0.0, 1000.0)
    b.busy_gpu(0.0, 5)
    report = analyze(b.write(tmp_path / "gpu.json"))
    assert "host time in the window" not in render_text(report)  # the GPU breakdown says where the time went
    assert json.loads(render_json(report))["ranks"][0]["host_time"]["window_us"] == 1000.0


def _optimizer_trace(path: Path) -> Path:
    """A real torch CPU run without ProfilerStep markers (as an on-demand trace of 5 iterations): steps come from
    the 5 optimizer.step calls; each iteration spins 3 ms in Python and sleeps 3 ms, neither traced."""
    torch = pytest.importorskip("torch")
    import time

    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, foreach=False)
    x, y = torch.randn(8, 32), torch.randn(8, 4)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            t = time.perf_counter()
            while time.perf_counter() - t < 0.003:
                pass
            time.sleep(0.003)
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    prof.export_chrome_trace(str(path))
    return path


def test_real_cpu_run_steps_and_untraced_time(tmp_path: Path) -> None:
    report = analyze(_optimizer_trace(tmp_path / "opt.json"))
    rank = report.ranks[0]
    assert rank.steps is not None and rank.steps.source == "optimizer" and rank.steps.count == 4
    assert rank.steps.markers == 5  # profiled by hand around the loop: the time before the first call is no step
    text = render_text(report)
    assert "(4 steps between 5 optimizer.step calls)" in text
    (f,) = report.findings_of("optimizer")
    assert "in 5 optimizer.step calls" in f.title and f.evidence.counts["optimizer_steps"] == 5
    h = rank.host_time
    assert h is not None
    # at least 4 x 6 ms of spinning and sleeping between the first and the last op: nothing traced
    assert h.untraced_us >= 4 * 6000.0 and h.ops_us > 0
    assert h.ops_us + h.other_traced_us + h.untraced_us == pytest.approx(h.window_us)


def _iteration_trace(path: Path, iterations: int) -> Path:
    """A real iteration trace as the agent records ``--iterations N``: its StepCounter hook starts torch.profiler
    in one optimizer step's post-hook and stops it in the N-th next one's."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    from dyno.client.agent.spec import AgentTraceSpec
    from dyno.client.agent.steps import IterationPlan, StepCounter

    counter = StepCounter()
    counter.install()
    plan = IterationPlan(
        AgentTraceSpec("t", path, iterations=iterations), lambda: profile(activities=[ProfilerActivity.CPU])
    )
    counter.set_plan(plan)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, foreach=False)
    x, y = torch.randn(8, 32), torch.randn(8, 4)
    for _ in range(iterations + 3):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert plan.completed
    plan.profiler.export_chrome_trace(str(path))
    return path


def test_iteration_trace_counts_its_iterations(tmp_path: Path) -> None:
    # the trace holds 5 whole iterations, the first from the profiler's start (inside a step's post-hook) to the
    # first recorded optimizer.step's end: 5 steps, as the optimizer finding's 5 calls
    report = analyze(_iteration_trace(tmp_path / "iter.json", 5))
    rank = report.ranks[0]
    assert rank.steps is not None and (rank.steps.count, rank.steps.markers) == (5, 5)
    assert "(5 steps ending at 5 optimizer.step calls: an iteration trace)" in render_text(report, width=0)
    (f,) = report.findings_of("optimizer")
    assert "in 5 optimizer.step calls" in f.title
    assert json.loads(render_json(report))["ranks"][0]["steps"]["markers"] == 5

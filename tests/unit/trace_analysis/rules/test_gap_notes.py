"""Examples of GPU idle gaps say what the host did meanwhile (``Example.note``): the thread that launched the GPU
work ending the gap, its events' self time inside the gap by name, and the part no profiled event covers; when
that thread is mostly unprofiled (e.g. the autograd thread waiting for the main thread), the busiest thread too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from analysis_trace_builder import TID, TraceBuilder

from dyno.trace_analysis import analyze
from dyno.trace_analysis.report import render_html, render_json, render_text
from dyno.trace_analysis.rules import host_activity

pytestmark = pytest.mark.unit

RULES = ["gpu-starvation", "host-bound"]
OTHER_TID = 202


def _gap_trace(tmp_path: Path, main_busy: bool, other_busy: bool) -> Path:
    """A kernel, a ~700 ms GPU idle gap, a kernel launched from TID at its end."""
    b = TraceBuilder()
    b.launch("k1", 0.0, 10.0, 100.0)
    if main_busy:  # the launching thread: cudaFree (600 ms) inside a convolution (700 ms)
        b.cpu("aten::conv2d", 200.0, 700_000.0)
        b.runtime("cudaFree", 300.0, 600_000.0)
    if other_busy:  # another thread: an optimizer step over most of the gap
        b.cpu("Optimizer.step#Shampoo.step", 1_000.0, 650_000.0, tid=OTHER_TID)
        b.cpu("aten::mm", 2_000.0, 100_000.0, tid=OTHER_TID)
    b.launch("k2", 700_300.0, 700_400.0, 100.0)
    return b.write(tmp_path / "gap.json")


def _notes(path: Path, rule: str) -> list[str | None]:
    report = analyze([path], rules=RULES)
    (f,) = report.findings_of(rule)
    return [x.note for x in f.evidence.examples]


@pytest.mark.parametrize("rule", RULES)
def test_note_names_the_launching_threads_calls(tmp_path: Path, rule: str) -> None:
    (note,) = _notes(_gap_trace(tmp_path, main_busy=True, other_busy=False), rule)
    assert note is not None and note.startswith(f"host tid {TID}: cudaFree 600.0 ms (86%), aten::conv2d 100.0 ms")
    assert "busiest" not in note and "no profiled event" not in note


def test_unprofiled_launching_thread_names_the_busiest_thread(tmp_path: Path) -> None:
    (note,) = _notes(_gap_trace(tmp_path, main_busy=False, other_busy=True), "gpu-starvation")
    assert note is not None
    launcher, busiest = note.split("; ")
    assert launcher.startswith(f"host tid {TID}: no profiled event") and "(100%)" in launcher
    assert busiest.startswith(f"busiest tid {OTHER_TID}: Optimizer.step#Shampoo.step 550.0 ms (79%), aten::mm")


def test_busy_launching_thread_does_not_name_another(tmp_path: Path) -> None:
    (note,) = _notes(_gap_trace(tmp_path, main_busy=True, other_busy=True), "gpu-starvation")
    assert note is not None and f"tid {OTHER_TID}" not in note


def test_no_note_without_a_gap_example(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.busy_gpu(0.0, 50)  # GPU-bound: no gap, no host-bound or starvation finding
    report = analyze([b.write(tmp_path / "busy.json")], rules=RULES)
    assert report.findings == ()


def test_reports_show_the_note(tmp_path: Path) -> None:
    report = analyze([_gap_trace(tmp_path, main_busy=True, other_busy=False)], rules=["gpu-starvation"])
    text = render_text(report)
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "e.g. GPU idle gap" in line)
    assert lines[at + 1].strip().startswith(f"host tid {TID}: cudaFree 600.0 ms")
    (f,) = json.loads(render_json(report))["findings"]
    assert f["evidence"]["examples"][0]["note"].startswith(f"host tid {TID}: cudaFree")
    assert "cudaFree 600.0 ms (86%)" in render_html(report)


def test_nesting_loop_and_numpy_pass_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = TraceBuilder()
    b.launch("k1", 0.0, 10.0, 100.0)
    t = 200.0
    for i in range(150):  # nested ops, more than the loop's limit, some touching their neighbours
        b.cpu("aten::linear", t, 3_000.0)
        b.cpu("aten::addmm", t + 10.0, 2_000.0 + (i % 7) * 100)
        b.runtime("cudaMalloc", t + 20.0, 500.0)
        t += 3_000.0 + (i % 3) * 1_000.0
    b.launch("k2", t + 100.0, t + 200.0, 100.0)
    path = b.write(tmp_path / "many.json")
    loop = _notes(path, "gpu-starvation")
    monkeypatch.setattr(host_activity, "_LOOP_ROWS", 0)
    numpy_pass = _notes(path, "gpu-starvation")
    monkeypatch.setattr(host_activity, "_LOOP_ROWS", 10_000)
    assert loop == numpy_pass == _notes(path, "gpu-starvation")
    assert loop[0] is not None and "aten::addmm" in loop[0] and "150 calls" in loop[0]


# The gap note names the thread that launched the GPU row ending the gap


MAIN, OTHER = 101, 555


def _launch(b: TraceBuilder, tid: int, name: str, ts: float, k_ts: float, k_dur: float, stream: int, dev: int) -> None:
    corr = b._next()
    b.events.append(
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 100,
            "tid": tid,
            "ts": ts,
            "dur": 5.0,
            "args": {"correlation": corr},
        }
    )
    args: dict[str, Any] = {"correlation": corr, "stream": stream, "device": dev}
    b.events.append(
        {"ph": "X", "cat": "kernel", "name": name, "pid": dev, "tid": stream, "ts": k_ts, "dur": k_dur, "args": args}
    )


def _note(tmp_path: Path, b: TraceBuilder, rule: str) -> str:
    (f,) = analyze([b.write(tmp_path / "t.json")], rules=[rule]).findings_of(rule)
    note = f.evidence.examples[0].note
    assert note is not None
    return note


def test_host_bound_note_finds_the_stream_behind_a_burst(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0.0, 5_000.0)
    b.step(2, 5_000.0, 5_000.0)
    _launch(b, MAIN, "gemm_a", 50.0, 100.0, 2_000.0, stream=7, dev=0)
    for i in range(300):  # another thread's side-stream kernels, launched in the window, run after it
        _launch(b, OTHER, "side_k", 6_000.0 + i * 10, 10_001.0 + i * 20, 5.0, stream=9, dev=0)
    _launch(b, MAIN, "gemm_b", 9_000.0, 20_000.0, 2_000.0, stream=7, dev=0)  # ends stream 7's host_wait gap
    assert _note(tmp_path, b, "host-bound").startswith(f"host tid {MAIN}:")


def test_starvation_note_keeps_to_the_gap_device(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0.0, 600_000.0)
    b.step(2, 600_000.0, 600_000.0)
    _launch(b, MAIN, "gemm_a", 50.0, 100.0, 2_000.0, stream=7, dev=0)
    _launch(b, OTHER, "gemm_c", 60.0, 200.0, 1_100_000.0, stream=7, dev=1)  # device 1 busy meanwhile
    _launch(b, OTHER, "gemm_d", 1_150_000.0, 1_300_001.0, 5.0, stream=7, dev=1)  # first row after the window
    _launch(b, MAIN, "gemm_b", 1_100_000.0, 2_000_000.0, 5.0, stream=7, dev=0)  # ends GPU 0's gap
    assert _note(tmp_path, b, "gpu-starvation").startswith(f"host tid {MAIN}:")

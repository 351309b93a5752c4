"""A kineto iteration trace that libkineto turned into its 500 ms fallback window (no optimizer step to count) is
done with a note saying so; one that holds its iterations is done without. Files are written the way libkineto
writes them (indented JSON, the window's two instant markers after the events)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_proc import host_a_manager
from manual_clock import Clock

from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing import kineto_window as kw
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import TraceSpec, TraceState

pytestmark = pytest.mark.unit

T0 = 5_224_101_491_192.691  # µs, as libkineto writes them


def kineto_file(path: Path, *, window_ms: float, steps: int, pad_events: int = 0, markers: bool = True) -> Path:
    events: list[dict] = []
    for i in range(steps):
        ts = T0 + (i + 0.5) * window_ms * 1000 / max(steps, 1)
        events.append({"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "ts": ts, "dur": 100})
    events += [{"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "ts": T0 + 10, "dur": 5}] * pad_events
    events.append({"ph": "M", "name": "process_name", "ts": T0, "pid": 1, "tid": 0, "args": {"name": "python"}})
    if markers:
        events.append({"ph": "i", "s": "g", "name": "Iteration Start: PyTorch Profiler", "pid": "Traces", "ts": T0})
        events.append({"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "ts": T0 + window_ms * 1000})
    path.write_text(json.dumps({"schemaVersion": 1, "trace_id": "t", "traceEvents": events}, indent=2))
    return path


def test_record_window_is_read_from_the_tail(tmp_path: Path) -> None:
    path = kineto_file(tmp_path / "a.json", window_ms=499.97, steps=0, pad_events=3000)
    window = kw.record_window(path, tail_bytes=4096)
    assert window is not None and window.duration_ms == pytest.approx(499.97)
    assert kw.record_window(kineto_file(tmp_path / "b.json", window_ms=500, steps=0, markers=False)) is None
    assert kw.record_window(tmp_path / "missing.json") is None


def test_count_optimizer_steps_across_chunk_boundaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = kineto_file(tmp_path / "a.json", window_ms=300, steps=7, pad_events=50)
    for chunk in (7, 16, 33, 1 << 20):  # the mark split everywhere, never counted twice
        monkeypatch.setattr(kw, "_CHUNK", chunk)
        assert kw.count_optimizer_steps(path) == 7


@pytest.mark.parametrize(
    "window_ms, steps, iterations, noted",
    [
        (499.97, 0, 3, True),  # no optimizer: libkineto's 500 ms fallback
        (500.4, 2, 10, True),  # not stepping yet when it started: still the fallback window
        (120.0, 3, 3, False),  # the iterations asked for
        (500.1, 5, 5, False),  # N steps that happened to take 500 ms
        (2000.0, 0, 3, False),  # not the fallback window: cannot tell, say nothing
    ],
)
def test_iteration_fallback_note(tmp_path: Path, window_ms: float, steps: int, iterations: int, noted: bool) -> None:
    note = kw.iteration_fallback_note(kineto_file(tmp_path / "t.json", window_ms=window_ms, steps=steps), iterations)
    assert bool(note) == noted
    if noted:
        assert f"not {iterations} iteration(s)" in note and "optimizer.step()" in note
        assert f"{window_ms:.0f} ms window with {steps} optimizer step(s)" in note


def _delivered_iteration_trace(tmp_path: Path, iterations: int) -> tuple[TraceManager, str, Path, ProcessRegistry]:
    clock = Clock()
    reg = ProcessRegistry(is_alive=lambda pid: True, clock_ms=clock)
    tm = host_a_manager(reg, tmp_path / "traces", clock)
    poll = KinetoPoll(pid=300, ancestry=(), job_id="7", type_mask=3)
    tm.kineto_poll(poll)
    r = tm.start(TraceSpec(job_id="7", iterations=iterations, trace_id="kit"))
    assert tm.kineto_poll(poll)  # the config handed over
    return tm, r.trace_id, Path(r.triggered[0].path), reg


def test_done_kineto_iteration_trace_carries_the_fallback_note(tmp_path: Path) -> None:
    tm, trace_id, path, _reg = _delivered_iteration_trace(tmp_path, 3)
    kineto_file(path, window_ms=499.97, steps=0)
    tm.housekeeping()
    (p,) = tm.get(trace_id).processes
    assert p.state == TraceState.DONE and p.size_bytes == path.stat().st_size
    assert p.error.startswith("not 3 iteration(s): libkineto counts iterations by optimizer.step() calls")


def test_done_kineto_iteration_trace_with_its_steps_has_no_note(tmp_path: Path) -> None:
    tm, trace_id, path, _reg = _delivered_iteration_trace(tmp_path, 3)
    kineto_file(path, window_ms=75, steps=3)
    tm.housekeeping()
    (p,) = tm.get(trace_id).processes
    assert p.state == TraceState.DONE and p.error == ""


def test_kineto_exit_right_after_its_fallback_file_keeps_the_note(tmp_path: Path) -> None:
    tm, trace_id, path, reg = _delivered_iteration_trace(tmp_path, 2)
    kineto_file(path, window_ms=500, steps=0)
    reg.remove(300, "process exited")  # before housekeeping saw the file
    (p,) = tm.get(trace_id).processes
    assert p.state == TraceState.DONE and p.error.startswith("not 2 iteration(s)")

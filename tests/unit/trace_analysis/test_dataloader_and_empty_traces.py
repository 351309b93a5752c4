"""Two findings from real traces of every shape: a DataLoader that already has worker processes
(``_MultiProcessingDataLoaderIter``) was told to "use num_workers>0"; a file that parses but holds no events said
"traceEvents is empty" also for a bare array of numbers (torch's ``export_memory_timeline`` output) that has no
traceEvents at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dyno.trace_analysis import analyze
from dyno.trace_analysis.loader import TraceLoadError, load_trace

pytestmark = pytest.mark.unit


def _loader_trace(path: Path, iterator: str) -> Path:
    ev = []
    for i in range(4):  # 4 steps of 10 ms, 4 ms of each waiting for the next batch
        t0 = i * 10_000.0
        ev.append(
            {"ph": "X", "cat": "user_annotation", "name": f"enumerate(DataLoader)#{iterator}.__next__", "ts": t0,
             "dur": 4_000, "pid": 5, "tid": 5}
        )  # fmt: skip
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": t0 + 4_000, "dur": 6_000, "pid": 5, "tid": 5})
    path.write_text(json.dumps({"traceEvents": ev}))
    return path


def test_dataloader_with_workers_gets_the_workers_fix(tmp_path: Path) -> None:
    report = analyze(_loader_trace(tmp_path / "t.json", "_MultiProcessingDataLoaderIter"), rules=["dataloader"])
    (f,) = report.findings_of("dataloader")
    assert f.fix.startswith("The DataLoader already loads in worker processes")
    assert "persistent_workers=True" in f.fix and "num_workers>0" not in f.fix


def test_dataloader_without_workers_keeps_the_num_workers_fix(tmp_path: Path) -> None:
    report = analyze(_loader_trace(tmp_path / "t.json", "_SingleProcessDataLoaderIter"), rules=["dataloader"])
    (f,) = report.findings_of("dataloader")
    assert f.fix.startswith("Load batches in the background: DataLoader(num_workers>0")


def _reason(path: Path, text: str) -> str:
    path.write_text(text)
    with pytest.raises(TraceLoadError) as e:
        load_trace(path)
    assert e.value.path == str(path)
    return e.value.reason


@pytest.mark.parametrize("native", ["1", "0"])
def test_not_a_trace_array_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native: str) -> None:
    monkeypatch.setenv("DYNO_NATIVE_PARSE", native)
    reason = _reason(tmp_path / "mem.json", "[[1796112800178776, 1796112800178915], [[0, 1], [2, 3]]]")
    assert reason.startswith("no trace events (a bare JSON array, 2 elements, none a trace event: not a Chrome trace?")
    assert "traceEvents" not in reason
    reason = _reason(tmp_path / "nums.json", "[1, 2, 3]")  # scalars are elements too
    assert reason.startswith("no trace events (a bare JSON array, 3 elements, none a trace event")


@pytest.mark.parametrize("native", ["1", "0"])
def test_empty_and_metadata_only_traces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native: str) -> None:
    monkeypatch.setenv("DYNO_NATIVE_PARSE", native)
    assert _reason(tmp_path / "e.json", '{"traceEvents": []}') == (
        "no trace events (traceEvents is empty: nothing was profiled)"
    )
    meta_only = {"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "p"}}]}
    assert _reason(tmp_path / "m.json", json.dumps(meta_only)) == (
        "no trace events (traceEvents has 1 element, none a complete, flow, instant or memory event)"
    )


def test_execution_trace_beside_the_kineto_trace_is_named(tmp_path: Path) -> None:
    et = {"schema": "1.1.1-chakra.0.0.4", "pid": 7, "time": "2026-12-01", "start_ts": 1, "finish_ts": 9, "nodes": []}
    reason = _reason(tmp_path / "et.json", json.dumps(et))
    assert reason == (
        "wrong schema: no traceEvents array (top-level keys: finish_ts, nodes, pid, schema, start_ts, time); "
        "a PyTorch execution trace (ExecutionTraceObserver), not a profiler trace: analyse the Kineto trace"
    )
    other = _reason(tmp_path / "config.json", json.dumps({"schema": "x", "lr": 0.1}))
    assert other == "wrong schema: no traceEvents array (top-level keys: lr, schema)"

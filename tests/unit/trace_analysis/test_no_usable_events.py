"""A trace whose every event has a non-numeric ts is a load error like an empty traceEvents ("no usable events"),
not an empty model, and in a folder the other ranks still load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dyno.trace_analysis import AnalysisError, analyze
from dyno.trace_analysis.loader import TraceLoadError, load_trace, load_traces

pytestmark = pytest.mark.unit


def _write(path: Path, ts: list[object]) -> Path:
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": t, "dur": 1, "pid": 1, "tid": 1} for t in ts]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_only_string_timestamps_is_a_load_error(tmp_path: Path) -> None:
    bad = _write(tmp_path / "rank0.json", ["x", "y"])
    with pytest.raises(TraceLoadError, match=r"no usable events \(2 events, none with a numeric ts\)"):
        load_trace(bad)
    with pytest.raises(AnalysisError, match="no usable events"):
        analyze([bad])


def test_one_numeric_timestamp_loads_and_a_bad_rank_is_reported(tmp_path: Path) -> None:
    good = _write(tmp_path / "rank1.json", ["x", 5.0])
    assert len(load_trace(good).events) == 1
    _write(tmp_path / "rank0.json", ["x"])
    job = load_traces(tmp_path)
    assert job.ranks == [1]
    assert [e.reason for e in job.errors] == ["no usable events (1 event, none with a numeric ts)"]

"""A trace whose args nest deeper than the decoders' recursion limits is a one-line load error, not a
RecursionError traceback (msgspec raises RecursionError, which decode_events did not hand to the general parser)."""

from __future__ import annotations

import pytest

from dyno.trace_analysis.loader import TraceLoadError, load_trace

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("native", ["1", "0"])
def test_deeply_nested_args_is_a_load_error(tmp_path, monkeypatch, native):
    monkeypatch.setenv("DYNO_NATIVE_PARSE", native)
    depth = 100_000
    deep = "[" * depth + "]" * depth
    path = tmp_path / "deep.json"
    path.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 5, '
        f'"args": {{"x": {deep}}}}}]}}'
    )
    with pytest.raises(TraceLoadError, match="deep.json"):
        load_trace(path)

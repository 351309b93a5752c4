"""trace_analysis loader, what a file's values mean: times beyond ±2**53 µs are refused with the field, the count
and an example (no numpy warning, no NaN or inf report); a repeated traceEvents key keeps its last value, as
JSON.parse and Python's json do; the element count in "no trace events" counts every element. Both decoders and
any block size agree."""

from __future__ import annotations

import io
import json
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from dyno.trace_analysis import cli
from dyno.trace_analysis.loader import TraceLoadError, load_trace

pytestmark = pytest.mark.unit


def _x(ts: Any, dur: Any = 5, name: str = "aten::add", cat: str = "cpu_op", **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def _kernel(ts: Any, dur: Any = 5) -> dict[str, Any]:
    return {**_x(ts, dur, "k", "kernel", device=0, stream=7, correlation=1), "pid": 0, "tid": 7}


def _reason(path: Path, block: int = 1 << 20) -> str:
    with warnings.catch_warnings(), pytest.raises(TraceLoadError) as err:
        warnings.simplefilter("error")  # numpy's overflow warnings fail the test
        load_trace(path, block_size=block)
    return err.value.reason


@pytest.mark.parametrize("block", [1 << 20, 300])
@pytest.mark.parametrize("value", [1e308, -1e30, 2.0**53 + 4096])
def test_out_of_range_times_are_refused_and_described(tmp_path: Path, parser: str, block: int, value: float) -> None:
    good = [_x(10 * i) for i in range(20)] + [_kernel(10 * i) for i in range(20)]
    flow = {"ph": "f", "id": 1, "ts": value, "pid": 1, "tid": 1, "cat": "ac2g", "bp": "e"}
    bad = [_kernel(value), _x(value, name="bad op"), flow, {"ph": "i", "name": "mark", "ts": value, "pid": 1}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": good[:10] + bad + good[10:]}))
    reason = _reason(path, block)
    assert reason.startswith("times out of range: 2 complete events with ts beyond ±9.0e+15 µs (e.g. ")
    assert f"with ts={value:g})" in reason
    assert f"1 flow event with ts beyond ±9.0e+15 µs (e.g. ts={value:g})" in reason
    assert "1 instant event with ts beyond" in reason
    assert "the file is corrupt or not from a profiler" in reason


def test_a_duration_past_the_range_is_named(tmp_path: Path, parser: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [_x(10), _x(20, 1e308, name="long op"), _x(30, 1e30)]}))
    assert _reason(path) == (
        "times out of range: 2 complete events with ts + dur beyond ±9.0e+15 µs (e.g. 'long op' with ts=20, "
        "dur=1e+308) (times are microseconds, about 1.7e15 since the epoch; the file is corrupt or not from a "
        "profiler)"
    )


def test_times_of_today_and_the_limit_load(tmp_path: Path, parser: str) -> None:
    now = 1_712_195_495_519_695.8
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [_x(now), _kernel(now + 3), _x(-(2.0**53)), _x(2.0**53 - 5)]}))
    t = load_trace(path)
    assert len(t.events) == 4 and t.events.ts.max() == 2.0**53 - 5


def test_the_cli_says_it_on_one_line_without_warnings(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [_x(10), _kernel(20), _kernel(1e308)]}))
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main([str(path)])
    assert code == 1
    assert err.getvalue().count("\n") == 1, err.getvalue()  # one line: no numpy warning with its source line
    assert "1 complete event with ts beyond ±9.0e+15 µs (e.g. 'k' with ts=1e+308)" in err.getvalue()
    assert "nan" not in out.getvalue() + err.getvalue()


def _doc(*arrays: str, pad: int = 0) -> str:
    """A trace object with one traceEvents key per array text (``pad`` bytes of metadata between them)."""
    parts = [f'"traceEvents": {a}' for a in arrays]
    return "{" + f', "pad": "{"p" * pad}", '.join(parts) + ', "displayTimeUnit": "ms"}'


def _names(t: Any) -> set[str]:
    return {t.strings[int(i)] for i in t.events.name}


@pytest.mark.parametrize("block", [64, 1000, 1 << 20])
@pytest.mark.parametrize("pad", [0, 3000])
def test_a_repeated_trace_events_key_keeps_the_last(tmp_path: Path, parser: str, block: int, pad: int) -> None:
    a = json.dumps([_x(i, name="first") for i in range(3)])
    b = json.dumps([_x(i, name="last") for i in range(5)])
    path = tmp_path / "t.json"
    for arrays, want in (((a, b), {"last"}), ((a, b, a), {"first"}), ((b, a, b), {"last"})):
        text = _doc(*arrays, pad=pad)
        assert {e["name"] for e in json.loads(text)["traceEvents"]} == want  # what Python's json keeps
        path.write_text(text)
        t = load_trace(path, block_size=block)
        assert _names(t) == want and len(t.events) == len(json.loads(text)["traceEvents"])
    path.write_text(_doc(a, "[]", pad=pad))
    assert _reason(path, block) == "no trace events (traceEvents is empty: nothing was profiled)"
    path.write_text(_doc(a, "5", pad=pad))
    assert _reason(path, block) == "wrong schema: traceEvents is a number, not an array"


def test_a_nested_trace_events_key_is_not_the_trace(tmp_path: Path, parser: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [_x(1)], "m": {"traceEvents": [_x(2), _x(3)]}}))
    assert len(load_trace(path, block_size=64).events) == 1


@pytest.mark.parametrize(
    "events",
    [[1, 2, 3, 4, 5], ["a", "b", {"x": 1}, 3, 4], [{"ph": "B"}, 2, [3], None, True]],
)
def test_the_element_count_counts_every_element(tmp_path: Path, parser: str, events: list[Any]) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert (
        _reason(path) == "no trace events (traceEvents has 5 elements, none a complete, flow, instant or memory event)"
    )

"""trace_analysis loader, one very large JSON value: an element or a metadata value larger than
``jsonscan.MAX_ELEMENT_BYTES`` is refused with a clear error (whatever decoder, block size and place); elements
up to it and metadata of many arrays load as before. (The time they take is measured by bench/large_element.py.)"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from dyno.trace_analysis import jsonscan
from dyno.trace_analysis.jsonscan import ScanError, ScanResult, iter_event_batches
from dyno.trace_analysis.loader import TraceLoadError, load_trace

pytestmark = pytest.mark.unit


def _x(ts: int, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": ts, "dur": 5, "args": args}


def _events(n: int) -> list[dict[str, Any]]:
    return [_x(10 * i) for i in range(n)]


def test_an_element_over_the_cap_is_refused_and_named(tmp_path: Path, parser: str) -> None:
    """A real file: 1,000 events and one whose args hold a string just over the cap (a few hundred KB of gzip)."""
    path = tmp_path / "t.json.gz"
    with gzip.open(path, "wb", compresslevel=1) as fh:
        fh.write(b'{"traceEvents":[' + b",".join(orjson.dumps(e) for e in _events(1000)) + b',{"args":{"s":"')
        fh.write(b"a" * jsonscan.MAX_ELEMENT_BYTES)
        fh.write(b'"},"ph":"X","ts":1}]}')
    with pytest.raises(TraceLoadError) as err:
        load_trace(path)
    assert "a traceEvents element larger than 64 MiB" in err.value.reason
    assert "corrupt or was not written by a profiler" in err.value.reason


# (the cap is lowered for these tests: it must stay above the block size, as the real one is, since a file or an
# element that fits in a block is decoded whole without the scan that measures elements)
@pytest.mark.parametrize("block", [4096, 37])
@pytest.mark.parametrize("where", ["string", "nested", "bare", "meta_before", "meta_after"])
def test_any_value_over_the_cap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parser: str, block: int, where: str
) -> None:
    cap = 20_000
    monkeypatch.setattr(jsonscan, "MAX_ELEMENT_BYTES", cap)
    big = "x" * (cap + 10)
    events: list[Any] = _events(50)
    doc: Any = {"traceEvents": events}
    if where == "string":
        events.insert(20, _x(5, s=big))
    elif where == "nested":
        events.insert(20, _x(5, dims=[[i, i] for i in range(cap // 5)]))
    elif where == "bare":
        events.insert(20, _x(5, s=big))
        doc = events
    elif where == "meta_before":
        doc = {"note": big, "traceEvents": events}
    else:
        doc = {"traceEvents": events, "note": big}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    what = "metadata outside traceEvents" if where.startswith("meta") else "a traceEvents element"
    with pytest.raises(TraceLoadError, match=f"{what} larger than 20000 bytes"):
        load_trace(path, block_size=block)


@pytest.mark.parametrize("block", [1 << 20, 4096, 37])
def test_elements_up_to_the_cap_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parser: str, block: int) -> None:
    monkeypatch.setattr(jsonscan, "MAX_ELEMENT_BYTES", 20_000)
    events: list[Any] = _events(50)
    events.insert(20, _x(5, s="y" * 15_000, dims=[[1, 2]] * 100))
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"note": "z" * 9_000, "traceEvents": events, "tail": "w" * 9_000}))
    t = load_trace(path, block_size=block)
    assert len(t.events) == 51
    assert t.meta.other == {"note": "z" * 9_000, "tail": "w" * 9_000}


@pytest.mark.parametrize("block", [3, 64, 4096, 1 << 20])
def test_metadata_of_many_arrays_and_spaced_key(block: int) -> None:
    """Every ``[`` at the top level is checked for the key before it: long runs of whitespace around the colon,
    across blocks, and thousands of other arrays."""
    head = b'{"pad": ' + b"[]," * 1 + b",".join(b'"a%d": [1, [2]]' % i for i in range(5000))
    data = head + b', "traceEvents"' + b" " * 300 + b":\n" + b"\t" * 200 + b'[{"ph": "i"}, {"ph": "X"}], "b": []}'
    result = ScanResult()
    got = [e for items in iter_event_batches(io.BytesIO(data), result, block) for e in items]
    assert got == [{"ph": "i"}, {"ph": "X"}]
    assert result.meta is not None and result.meta["a4999"] == [1, [2]] and result.meta["traceEvents"] == []


def test_an_unfinished_huge_value_is_refused_before_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream that never ends its value (a FIFO fed forever) stops at the cap, not at the end of input."""
    monkeypatch.setattr(jsonscan, "MAX_ELEMENT_BYTES", 50_000)
    reads = 0

    class Endless(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, b: Any) -> int:
            nonlocal reads
            reads += 1
            assert reads < 1000, "read on past the cap"
            head = b'{"traceEvents": [{"args": "' if reads == 1 else b""
            n = len(b)
            b[:n] = (head + b"a" * n)[:n]
            return n

    with pytest.raises(ScanError, match="a traceEvents element larger than"):
        for _ in iter_event_batches(io.BufferedReader(Endless()), ScanResult(), 4096):
            pass

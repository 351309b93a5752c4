"""trace_analysis loader: a small gzip file is inflated in one call (``traceopen.gunzip_small``).

Only a file of one gzip member, whole, is taken that way; anything else (several members, data after the member,
a truncated or corrupt stream, a size in the trailer that is wrong) goes to the streaming reader, so the model and
the error messages are those of the streaming reader.
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest

from dyno.trace_analysis import traceopen
from dyno.trace_analysis.loader import TraceLoadError, load_trace

pytestmark = pytest.mark.unit


def _doc_bytes(n: int = 40) -> bytes:
    evs: list[dict[str, Any]] = [
        {"ph": "X", "cat": "cpu_op", "name": f"op{i % 3}", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5} for i in range(n)
    ]
    return json.dumps({"distributedInfo": {"rank": 2}, "traceEvents": evs, "traceName": "t"}).encode()


def _model(t: Any) -> tuple[Any, ...]:
    ev = t.events
    return (t.rank, ev.ts.tolist(), ev.dur.tolist(), [t.strings[i] for i in ev.name], dict(t.meta.other))


def _streamed(monkeypatch: pytest.MonkeyPatch, path: Path) -> Any:
    """What the streaming reader makes of ``path`` (the one-call path turned off): a Trace or the error."""
    with monkeypatch.context() as m:
        m.setattr(traceopen, "gunzip_small", lambda data, hint: None)
        try:
            return _model(load_trace(path))
        except TraceLoadError as e:
            return e.reason


def _loaded(path: Path) -> Any:
    try:
        return _model(load_trace(path))
    except TraceLoadError as e:
        return e.reason


def test_one_member_is_inflated_in_one_call_and_gives_the_streamed_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _doc_bytes()
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(data))
    fh, hint = traceopen.open_stream(p, p.stat().st_size)
    with fh:
        assert isinstance(fh, io.BytesIO) and hint == len(data) and fh.read() == data
    assert _loaded(p) == _streamed(monkeypatch, p) == _model(load_trace(_plain(tmp_path, data)))


def _plain(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "plain.json"
    p.write_bytes(data)
    return p


def test_other_gzip_layouts_go_to_the_streaming_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _doc_bytes()
    half = len(data) // 2
    whole = gzip.compress(data)
    cases = {
        "two members": gzip.compress(data[:half]) + gzip.compress(data[half:]),  # read as their concatenation
        "data after the member": whole + b"garbage",
        "zero padding": whole + bytes(16),
        "truncated": whole[:-12],
        "corrupt": whole[:30] + bytes(20) + whole[50:],
        "trailer size too small": whole[:-4] + (10).to_bytes(4, "little"),
    }
    for what, content in cases.items():
        p = tmp_path / f"{what.replace(' ', '_')}.json.gz"
        p.write_bytes(content)
        assert traceopen.gunzip_small(content, int.from_bytes(content[-4:], "little")) is None, what
        assert _loaded(p) == _streamed(monkeypatch, p), what
    assert _loaded(tmp_path / "two_members.json.gz") == _model(load_trace(_plain(tmp_path, data)))
    assert "truncated or corrupt gzip stream" in _loaded(tmp_path / "truncated.json.gz")


def test_missing_path_and_folder_errors(tmp_path: Path) -> None:
    with pytest.raises(TraceLoadError, match="no such file"):
        load_trace(tmp_path / "nope.json")
    with pytest.raises(TraceLoadError, match="no such file"):
        load_trace(tmp_path / "nope" / "t.json")
    with pytest.raises(TraceLoadError, match="is a directory"):
        load_trace(tmp_path)

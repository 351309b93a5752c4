"""trace_analysis loader, fixed cost of small files: the events array found and ended without the structural scan.

``jsonscan`` finds ``"traceEvents": [`` in the first block and the array's ``]`` in the last one by speculative
parses (no numpy scan), reads a file that fits in one block whole and decodes it in place. Whatever the layout,
the elements and the metadata must be exactly those the structural scan finds, at any block size and size hint.
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from dyno.trace_analysis import builder, jsonmeta, traceopen
from dyno.trace_analysis.jsonscan import ScanError, ScanResult, iter_event_batches
from dyno.trace_analysis.loader import find_trace_files, load_trace

pytestmark = pytest.mark.unit

_EVENTS: list[Any] = [
    {"ph": "X", "cat": "cpu_op", "name": 'a "}]," b', "pid": 1, "tid": 1, "ts": 1, "dur": 2, "args": {"x": [1, {}]}},
    {"ph": "i", "name": "mark ]", "pid": 1, "tid": 1, "ts": 2, "s": "t"},
    {"ph": "X", "cat": "kernel", "name": "k\\", "pid": 0, "tid": 7, "ts": 3, "dur": 1, "args": {"stream": 7}},
]


def _exact(batch: bytes | bytearray | memoryview) -> list[Any] | None:
    """A fast decoder that accepts exactly the valid JSON arrays (what the fast cuts rely on)."""
    try:
        return list(orjson.loads(bytes(batch)))
    except orjson.JSONDecodeError:
        return None


def _run(data: bytes, block: int, fast: bool, hint: int | None) -> tuple[list[Any], dict[str, Any] | None, int]:
    result = ScanResult()
    elements: list[Any] = []
    batches = 0
    for items in iter_event_batches(
        io.BytesIO(data), result, block, orjson.loads, _exact if fast else None, hint if fast else None
    ):
        elements.extend(items)
        batches += 1
    return elements, result.meta, batches


# documents whose layout makes the speculative parses decline somewhere: strings holding "traceEvents", "]" and
# "}" in the metadata after the array, no events. (A second traceEvents key is left out: the scan itself reads its
# events or not depending on where blocks end; the fast end cut declines when one follows, see below.)
_DOCS = {
    "kineto": b'{"schemaVersion": 1, "deviceProperties": [{"id": 0}], "traceEvents": %s, "traceName": "t.json"}',
    "after": b'{"distributedInfo": {"rank": 1},\n "traceEvents" :\n %s ,"deviceProperties": [{"a": [1]}], "z": "}]"}',
    "in_string": b'{"a": "\\"traceEvents\\": [", "b": "traceEvents", "traceEvents": %s, "c": "]"}',
    "nested_key": b'{"m": {"traceEvents": [1, 2]}, "traceEvents": %s}',
    "backslash": b'{"k": "x\\\\", "traceEvents": %s, "tail": "},"}',
    "first": b'{"traceEvents": %s}',
    "bare": b" \n%s\n",
    "bom": b"\xef\xbb\xbf" + b'{"traceEvents": %s}',
}


@pytest.mark.parametrize("name", sorted(_DOCS))
@pytest.mark.parametrize("events", [_EVENTS, _EVENTS[:1], []], ids=["three", "one", "none"])
def test_fast_start_and_end_find_what_the_scan_finds(name: str, events: list[Any]) -> None:
    text = json.dumps(events, indent=1).encode()
    data = _DOCS[name] % text
    for block in (7, 40, 64, 300, 1 << 20):
        want_elements, want_meta, _ = _run(data, block, fast=False, hint=None)
        assert len(want_elements) >= len(events)
        for hint in (None, 0, len(data), 10 * len(data)):
            got_elements, got_meta, _ = _run(data, block, fast=True, hint=hint)
            assert got_elements == want_elements, (name, block, hint)
            assert got_meta == want_meta, (name, block, hint)


def test_a_small_file_is_one_batch_and_the_meta_is_parsed_once() -> None:
    data = _DOCS["kineto"] % json.dumps(_EVENTS * 200).encode()
    elements, meta, batches = _run(data, 1 << 20, fast=True, hint=len(data))
    assert batches == 1 and len(elements) == 600
    assert meta == {"schemaVersion": 1, "deviceProperties": [{"id": 0}], "traceEvents": [], "traceName": "t.json"}
    # without a hint: the first (small) block and the next one, still one batch
    assert _run(data, 1 << 20, fast=True, hint=None)[2] == 1


@pytest.mark.parametrize(
    "data",
    [
        b'{"traceEvents": [{"ph": "X", "ts": 1}',  # truncated in the array
        b'{"traceEvents": [{"ph": "X", "ts": 1}], "a": ',  # truncated in the metadata after it
        b'{"traceEvents": [{"ph": "X", "ts": 1}]} trailing',  # text after the document
        b'{"traceEvents": [{"ph": "X", "ts": 1x}]}',  # invalid element
        b'{"a": tru, "traceEvents": [{"ph": "X", "ts": 1}]}',  # invalid metadata before the array
    ],
)
def test_bad_documents_raise_as_with_the_scan(data: bytes) -> None:
    with pytest.raises(ScanError) as want:
        _run(data, 1 << 20, fast=False, hint=None)
    for hint in (None, len(data)):
        with pytest.raises(ScanError) as got:
            _run(data, 1 << 20, fast=True, hint=hint)
        assert got.value.args[0].split(":")[0] == want.value.args[0].split(":")[0], hint


def test_events_start_needs_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    start = jsonmeta.events_start
    assert start(b'{"a": 1, "traceEvents" : [{') == len(b'{"a": 1, "traceEvents" : [')
    # "traceEvents" inside a string ends with a backslash before the closing quote: found only where it is a key
    assert start(b'{"a": "\\"traceEvents\\": [", "traceEvents": [') == 44
    assert start(b'{"a": "\\"traceEvents", "traceEvents": [') == -1  # the first match follows a backslash: scan
    assert start(b'{"x": "traceEvents", "traceEvents": [') == -1  # the first match is a value: scan
    assert start(b'{"m": {"traceEvents": [') == -1  # not a key of the root object
    assert start(b'{"traceEvents": 5, "x": [') == -1
    assert start(b'[{"traceEvents": [') == -1


def test_gzip_size_hint_reads_a_small_file_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {"distributedInfo": {"rank": 3}, "traceEvents": _EVENTS * 50, "traceName": "x"}
    data = json.dumps(doc).encode()
    gz, plain = tmp_path / "t.json.gz", tmp_path / "t.json"
    gz.write_bytes(gzip.compress(data))
    plain.write_bytes(data)
    for p in (gz, plain):
        fh, hint = traceopen.open_stream(p, p.stat().st_size)
        with fh:
            assert hint == len(data) and fh.read() == data
    batches: list[int] = []
    real = builder.TraceBuilder.add

    def counting(self: builder.TraceBuilder, items: Any, batch: Any = b"", last: bool = False) -> None:
        assert last, "a small file is one batch, the last"
        batches.append(len(items))
        real(self, items, batch, last)

    monkeypatch.setattr(builder.TraceBuilder, "add", counting)
    t_gz, t_plain = load_trace(gz), load_trace(plain)
    assert batches == [150, 150]
    assert t_gz.rank == t_plain.rank == 3 and len(t_gz.events) == len(t_plain.events) == 100
    assert t_gz.meta.other == {"traceName": "x"}


def test_find_trace_files_skips_hidden_and_symlinked_folders(tmp_path: Path) -> None:
    for rel in ("a.json", "b.json.gz", "c.json.part", "manifest.json", ".h.json", "s/x.json", "s/.d/y.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}")
    (tmp_path / "d.json").mkdir()  # a folder named like a trace: walked, not listed
    (tmp_path / "d.json" / "z.json").write_text("{}")
    (tmp_path / "link").symlink_to(tmp_path / "s")  # not followed, as Path.rglob
    (tmp_path / "l.json").symlink_to(tmp_path / "a.json")  # a linked file is listed
    names = [str(p.relative_to(tmp_path)) for p in find_trace_files(tmp_path)]
    assert names == ["a.json", "b.json.gz", "d.json/z.json", "l.json", "s/x.json"]


def test_end_cut_declines_before_a_second_events_array() -> None:
    meta = bytearray(b'{"traceEvents": []')
    head = bytearray(b'[{"ph": "X", "ts": 1}], "traceEvents": [{"ph": "X", "ts": 2}]}')
    assert jsonmeta.array_end_cut(head, 0, meta, _exact) is None
    ok = bytearray(b'[{"ph": "X", "ts": 1}], "after": [1]}')
    got = jsonmeta.array_end_cut(ok, 0, meta, _exact)
    assert got is not None and got[0] == [{"ph": "X", "ts": 1}] and got[1] == {"traceEvents": [], "after": [1]}
    assert bytes(got[2]) == b'[{"ph": "X", "ts": 1}]'


def test_metadata_the_model_does_not_read_is_not_parsed_again(tmp_path: Path) -> None:
    from dyno.trace_analysis import eventdecode

    if eventdecode._native is None:
        pytest.skip("native decoder not built")
    evs: list[Any] = [
        {"ph": "M", "name": "process_sort_index", "pid": 1, "args": {"sort_index": 1}},
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
        {"ph": "M", "name": "process_labels", "pid": 1, "args": {"labels": "name"}},
        {"ph": "M", "name": "thread_\\u006eame", "pid": 1, "tid": 3, "args": {"name": "escaped"}},
        {"ph": "X", "name": "op", "pid": 1, "tid": 2, "ts": 1, "dur": 1},
    ]
    batch = json.dumps(evs).replace("\\\\u006e", "\\u006e").encode()
    cols = eventdecode._native.decode_batch(batch)
    assert cols is not None and bytes(cols["group"]) == bytes([3, 2, 2, 3, 2, 0])
    p = tmp_path / "m.json"
    p.write_bytes(b'{"traceEvents": ' + batch + b"}")
    for native in ("1", "0"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(eventdecode.NATIVE_ENV, native)
            t = load_trace(p)
        assert t.meta.process_names == {1: "python"} and t.meta.thread_names == {(1, 2): "main", (1, 3): "escaped"}


class _Trickle(io.RawIOBase):
    """A stream whose reads come back short before its end (a short read does not always mean the end)."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data, self._pos, self._step = data, 0, step

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        out = self._data[self._pos : self._pos + min(n, self._step)]
        self._pos += len(out)
        return out


@pytest.mark.parametrize("name", ["kineto", "after", "backslash"])
def test_short_reads_before_the_end_give_the_same_result(name: str) -> None:
    data = (_DOCS[name] % json.dumps(_EVENTS * 3).encode()) + b"\n"
    want = _run(data, 1 << 20, fast=False, hint=None)[:2]
    for step in (5, 64, 300):
        for trailing in (b"", b" x"):  # text after the document: the same error as the scan gives
            result = ScanResult()
            stream = _Trickle(data + trailing, step)
            try:
                elements = [
                    e for items in iter_event_batches(stream, result, 1 << 20, orjson.loads, _exact) for e in items
                ]
            except ScanError as e:
                assert trailing, e
                with pytest.raises(ScanError):
                    _run(data + trailing, 1 << 20, fast=False, hint=None)
                continue
            assert not trailing and (elements, result.meta) == want, (name, step)

"""Trace files edited the ways users edit them: re-indented, events moved, a BOM, CRLF line ends load to the same
model; damaged ones (text after the JSON, NUL padding, UTF-16, Latin-1, gzip twice) fail with the file, the byte
offset in the file and the likely cause (a metadata error's offset is in the whole file, not in the metadata
without the events)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from dyno.trace_analysis.loader import TraceLoadError, load_trace

pytestmark = pytest.mark.unit


def _doc(n: int = 400) -> dict:
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 7}", "ts": 1000.5 + 10 * i, "dur": 5, "pid": 3, "tid": 3}
        for i in range(n)
    ]
    return {"schemaVersion": 1, "host_name": "vm", "traceEvents": ev, "traceName": "t"}


def _pretty(doc: dict) -> bytes:
    return json.dumps(doc, indent=4).encode()


def _same_model(a: Path, b: Path) -> None:
    ta, tb = load_trace(a), load_trace(b)
    assert len(ta.events) == len(tb.events) == 400
    np.testing.assert_array_equal(ta.events.ts, tb.events.ts)
    assert ta.names(ta.events) == tb.names(tb.events)
    assert ta.meta.host_name == tb.meta.host_name == "vm"


@pytest.mark.parametrize("native", ["1", "0"])
@pytest.mark.parametrize(
    "edit",
    [
        lambda b: b"\xef\xbb\xbf" + b,  # BOM
        lambda b: b.replace(b"\n", b"\r\n"),  # CRLF
        lambda b: b"\xef\xbb\xbf" + b.replace(b"\n", b"\r\n"),
        lambda b: json.dumps(json.loads(b), separators=(",", ":")).encode(),  # one line
        lambda b: json.dumps(json.loads(b), indent="\t").encode(),
        lambda b: json.dumps({"traceEvents": json.loads(b)["traceEvents"], "host_name": "vm"}).encode(),  # first
        lambda b: b.replace(b"\n", b"\r\n") + b"\r\n\r\n",  # trailing blank lines
    ],
    ids=["bom", "crlf", "bom-crlf", "compact", "tabs", "events-first", "trailing-newlines"],
)
def test_edited_files_load_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit, native: str) -> None:
    monkeypatch.setenv("DYNO_NATIVE_PARSE", native)
    orig = tmp_path / "orig.json"
    orig.write_bytes(_pretty(_doc()))
    edited = tmp_path / "edited.json"
    edited.write_bytes(edit(orig.read_bytes()))
    _same_model(orig, edited)
    gz = tmp_path / "edited.json.gz"
    gz.write_bytes(gzip.compress(edited.read_bytes()))
    _same_model(orig, gz)


def _reason(path: Path) -> str:
    with pytest.raises(TraceLoadError) as e:
        load_trace(path)
    assert e.value.path == str(path)
    return e.value.reason


@pytest.mark.parametrize("block_size", [1 << 20, 4096])
def test_text_after_the_json_is_located_in_the_file(tmp_path: Path, block_size: int) -> None:
    data = _pretty(_doc())
    p = tmp_path / "t.json"
    p.write_bytes(data + b"\nGARBAGE")
    with pytest.raises(TraceLoadError) as e:
        load_trace(p, block_size=block_size)
    offset = len(data) + 1
    assert e.value.reason == (
        f"invalid JSON outside traceEvents: unexpected content after the document at byte {offset}: b'GARBAGE'"
    )


def test_invalid_metadata_before_the_events_is_located(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    p.write_bytes(b'\xef\xbb\xbf{"host_name": tru, "traceEvents": []}')
    assert _reason(p).startswith("invalid JSON outside traceEvents at byte 17: ")  # the "t" of tru, BOM counted


def test_nul_padding_is_named(tmp_path: Path) -> None:
    data = _pretty(_doc())
    p = tmp_path / "t.json"
    p.write_bytes(data + b"\x00" * 4096)
    assert _reason(p).startswith(f"4096 NUL bytes after the end of the JSON at byte {len(data)} (zero padding")


def test_utf16_export_is_named(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    p.write_bytes(_pretty(_doc()).decode().encode("utf-16"))
    assert _reason(p).startswith("not JSON: UTF-16 text (byte-order mark FF FE); trace files are UTF-8")


def test_gzip_twice_is_named(tmp_path: Path) -> None:
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(gzip.compress(_pretty(_doc()))))
    assert _reason(p) == "not JSON: gzip data inside the gzip stream (compressed twice?): gunzip it once"


def test_plain_garbage_still_shows_its_start(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    p.write_bytes(b"<html>404 Not Found</html>")
    assert _reason(p) == "not JSON: starts with b'<html>404 Not Found<'"


@pytest.mark.parametrize("native", ["1", "0"])
@pytest.mark.parametrize("where", ["name", "process_name"])
@pytest.mark.parametrize("block_size", [1 << 20, 4096])
def test_latin1_byte_is_located(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native: str, where: str, block_size: int
) -> None:
    monkeypatch.setenv("DYNO_NATIVE_PARSE", native)
    doc = _doc()
    if where == "name":
        doc["traceEvents"][300]["name"] = "aten::tENh"
    else:  # a metadata event: parsed apart from the complete events
        meta = {"ph": "M", "name": "process_name", "pid": 3, "tid": 0, "args": {"name": "pythENn"}}
        doc["traceEvents"].insert(300, meta)
    data = _pretty(doc).replace(b"EN", b"\xe9")
    p = tmp_path / "t.json"
    p.write_bytes(data)
    with pytest.raises(TraceLoadError) as e:
        load_trace(p, block_size=block_size)
    reason = e.value.reason
    assert reason.startswith("invalid JSON in traceEvents (")
    assert "not valid UTF-8: byte 0xE9 at byte " in reason and "re-encoded, e.g. as Latin-1?" in reason
    assert "surrogates" not in reason
    at = reason.split("not valid UTF-8: byte 0xE9 at byte ")[1]
    if "of the file" in at:  # found by the scan: the file offset, exact
        assert int(at.split()[0]) == data.index(b"\xe9")


@pytest.mark.parametrize("native", ["1", "0"])
@pytest.mark.parametrize("block_size", [1 << 20, 4096])
def test_a_cut_file_says_how_much_was_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native: str, block_size: int
) -> None:
    monkeypatch.setenv("DYNO_NATIVE_PARSE", native)
    data = _pretty(_doc())
    cut = data.index(b'"ph"', data.index(b"aten::op3", len(data) // 2))  # inside an event, past half the file
    p = tmp_path / "t.json"
    p.write_bytes(data[:cut])
    whole = data[:cut].count(b"}")  # every closed brace before the cut closes one event (no nested objects)
    with pytest.raises(TraceLoadError) as e:
        load_trace(p, block_size=block_size)
    assert e.value.reason == (
        f"truncated: JSON ends inside an unfinished value after {cut} bytes ({whole} whole events before the cut)"
    )


def test_a_cut_in_the_metadata_before_the_events_gives_no_count(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    p.write_bytes(b'{"schemaVersion": 1, "host_na')
    assert _reason(p) == "truncated: JSON ends inside an unfinished value after 29 bytes"


def test_whitespace_only_is_an_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    p.write_bytes(b" \r\n\t\n")
    assert _reason(p) == "empty file (only whitespace, 5 bytes)"

"""trace_analysis native decoder (``_native.c``): same model as the Python path, declines what it cannot reproduce.

The native path must build exactly the model the pure-Python path builds (``DYNO_NATIVE_PARSE=0``: msgspec structs
and orjson dicts), string ids included, on every shared GPU trace and on synthetic edge cases, whatever the block
size; anything it does not handle must fall back with the same results and the same error messages.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dyno.trace_analysis import eventdecode
from dyno.trace_analysis.loader import TraceLoadError, find_trace_files, load_trace
from dyno.trace_analysis.model import Trace

from conftest import SHARED_TRACES

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(not eventdecode.native_available(), reason="native decoder not built (no C compiler)"),
]

REPO = Path(__file__).resolve().parents[2]
SHARED = SHARED_TRACES if SHARED_TRACES.is_dir() else None


def _native_calls(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record, per batch offered to the native decoder that the typed (msgspec) decoder accepts, whether the native
    one accepted it too (speculative cuts that end inside an element are invalid JSON and declined by both)."""
    calls: list[bool] = []
    real = eventdecode.decode_native

    def counting(batch: bytes | bytearray) -> Any:
        got = real(batch)
        if eventdecode.decode_events(batch) is not None:
            calls.append(got is not None)
        return got

    monkeypatch.setattr(eventdecode, "decode_native", counting)
    return calls


def _load(path: Path, native: bool, block_size: int = 1 << 20) -> Trace:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(eventdecode.NATIVE_ENV, "1" if native else "0")
        return load_trace(path, block_size=block_size)


def _assert_identical(a: Trace, b: Trace, what: Any) -> None:
    """Same strings (same ids), same columns, flows, memory, instants, extra args and metadata."""
    assert list(a.strings) == list(b.strings), what
    for col in a.events.COLUMNS:
        x, y = getattr(a.events, col), getattr(b.events, col)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), (what, col)
    for part in ("flows", "memory", "instants"):
        pa, pb = getattr(a, part), getattr(b, part)
        for f in pa.__struct_fields__:
            x, y = getattr(pa, f), getattr(pb, f)
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), (what, part, f)
    assert sorted(a.extra_args.items()) == sorted(b.extra_args.items()), what
    assert repr(a.meta) == repr(b.meta), what


@pytest.mark.skipif(SHARED is None, reason="shared GPU traces not found at <repo>/../shared/traces/gpu")
def test_every_shared_gpu_trace_gives_the_same_model(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SHARED is not None
    files = find_trace_files(SHARED)
    assert len(files) >= 7
    for f in files:
        expected = _load(f, native=False)
        calls = _native_calls(monkeypatch)
        got = _load(f, native=True)
        assert calls and all(calls), f.name
        _assert_identical(got, expected, f.name)
        monkeypatch.undo()


def _edge_events() -> list[Any]:
    """Events exercising every value form the native decoder parses (and a few it must decline)."""
    evs: list[Any] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "py \u00e9"}},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 0},
    ]
    names = ['q"uote', "back\\slash", "tab\there\nline", "caf\u00e9", "\u65e5\u672c", "emoji \U0001f600", "}, {"]
    # (times stay within valueranges.TS_LIMIT_US, 2**53 µs: beyond it a file is refused; test_many_float_forms
    # covers the parsing of larger numbers)
    numbers = [0, -0, 1, -17, 1e3, 1.5e-3, 2.5e2, -0.0, 0.1, 1234567890123456, 1712195495519695.8, 1e-7, 8.5e15]
    for i in range(600):
        ts: Any = 1000 + i * 3 + (numbers[i % len(numbers)] if i % 4 == 0 else 0)
        e: dict[str, Any] = {
            "ph": "X",
            "cat": ["cpu_op", "kernel", "cuda_runtime", "user_annotation", "Odd Cat", "gpu_memcpy"][i % 6],
            "name": names[i % len(names)] + str(i % 9),
            "pid": [1, "Spans", -3, 0][i % 4],
            "tid": [2, 7, "thread \u00e9", 2**40][i % 4],
            "ts": ts,
            "dur": [5, 0.25, None, 1e2][i % 4],
            "args": {
                "External id": i,
                "stream": [7, None, 4294967295][i % 3],
                "correlation": i * 2 if i % 5 else 2**53 + 1,
                "device": [0, 1, 70000][i % 3],
                "bytes": [1024, 1.5e9, -1][i % 3],
                "Sequence number": i if i % 7 == 0 else None,
                # compact JSON written natively; floats, objects, escapes, -0 and big ints normalized in Python
                "Input Dims": [[i % 3, 2], [], [[1]]] if i % 4 else None if i % 8 else [1.5, {"a": [-0, 10**19]}],
                "Input type": ["float", "", "c10::\u00e9", -12] if i % 3 else "scalar" if i % 6 else ['q"x', "a\\b"],
                "Collective name": "allreduce" if i % 9 == 0 else None,
                "In msg nelems": 64 if i % 9 == 0 else None,
                "Group size": 8,
                "dtype": "Float" if i % 9 == 0 else None,
                "nested": {"a": [1, {"b": ["}, {", None, True, False, -1.5e-300]}], "c": {}},
            },
        }
        if i % 10 == 3:
            del e["ts"]  # dropped at build
        if i % 10 == 4:
            del e["dur"], e["name"], e["cat"]
        if i % 10 == 5:
            del e["pid"], e["tid"]
            e["args"] = None
        if i % 10 == 6:
            e["args"] = {}
        if i % 10 == 7:
            del e["args"]
        evs.append(e)
        if i % 2 == 0:
            evs.append({"ph": "s", "id": i, "pid": 1, "tid": 2, "ts": ts, "cat": "ac2g", "name": "ac2g"})
            evs.append({"ph": "f", "id": i, "pid": 0, "tid": 7, "ts": 2 + ts, "cat": "ac2g", "bp": "e"})
        if i % 50 == 0:
            evs.append({"ph": "t", "pid": "Spans", "ts": ts})  # no id, no cat
            evs.append({"ph": "i", "name": "[memory]", "pid": 1, "tid": 2, "ts": ts, "args": {"Bytes": 512}})
            evs.append({"ph": "i", "name": "mark \u00e9", "pid": 1, "tid": 2, "ts": ts + 0.5, "s": "t"})
            evs.append({"ph": "C", "name": "counter", "pid": 1, "ts": ts, "args": {"v": [1, 2]}})
            evs.append({"name": "no phase", "ts": ts})
    return evs


def _dump(events: list[Any], style: str) -> bytes:
    doc = {"distributedInfo": {"rank": 1}, "traceEvents": events, "tail": "},"}
    if style == "indent":
        return json.dumps(doc, indent=2).encode()
    if style == "ascii":  # \uXXXX escapes (surrogate pairs for the emoji) instead of UTF-8
        return json.dumps(doc, ensure_ascii=True, separators=(",", ":")).encode()
    if style == "crlf":
        return json.dumps(doc, indent="\t", ensure_ascii=False).replace("\n", "\r\n").encode()
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


@pytest.mark.parametrize("style", ["compact", "indent", "ascii", "crlf"])
def test_edge_cases_give_the_same_model_at_any_block_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    path = tmp_path / "edge.json.gz"
    path.write_bytes(gzip.compress(_dump(_edge_events(), style)))
    expected = _load(path, native=False)
    assert expected.meta.float_timestamps and len(expected.events) > 500 and expected.extra_args
    pids = set(expected.events.pid.tolist())
    assert -3 in pids and 1 in pids and len(pids) >= 4  # an integer -3, "Spans", "None" (no pid) beside ints
    calls = _native_calls(monkeypatch)
    for block in (700, 5000, 30_000, 1 << 20):
        # string ids follow the batch boundaries (first-seen order per batch), so compare at the same block size
        want = _load(path, native=False, block_size=block) if block != 1 << 20 else expected
        calls.clear()
        got = _load(path, native=True, block_size=block)
        assert calls and all(calls), (style, block)
        _assert_identical(got, want, (style, block))


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")  # 10**30 as int64, on both paths
def test_values_it_does_not_handle_make_it_decline_with_the_same_model(tmp_path: Path) -> None:
    base = _edge_events()[:40]
    odd: list[Any] = [
        {"ph": "X", "name": "string ts", "pid": 1, "tid": 1, "ts": "12", "dur": 1},
        {"ph": "X", "name": "float pid", "pid": 1.5, "tid": 1, "ts": 3, "dur": 1},
        {"ph": "X", "name": 7, "pid": 1, "tid": 1, "ts": 3, "dur": 1},
        {"ph": "X", "name": "huge ts", "pid": 1, "tid": 1, "ts": 2**64 + 3, "dur": 1},
        {"ph": "X", "name": "huge id", "pid": 1, "tid": 1, "ts": 4, "args": {"External id": 10**30}},
        {"ph": "X", "name": "bool dur", "pid": 1, "tid": 1, "ts": 5, "dur": True},
        {"ph": "X", "name": "str stream", "pid": 1, "tid": 1, "ts": 6, "args": {"stream": "7"}},
        {"ph": "X", "name": "num coll", "pid": 1, "tid": 1, "ts": 7, "args": {"Collective name": 3}},
        {"ph": "X", "name": "args list", "pid": 1, "tid": 1, "ts": 8, "args": [1]},
        {"ph": "s", "id": "0x1f", "pid": 1, "tid": 1, "ts": 9, "cat": "ac2g"},
        {"ph": 5, "name": "numeric phase", "ts": 10},
        17,
    ]
    for k, e in enumerate(odd):
        path = tmp_path / f"odd{k}.json"
        path.write_bytes(json.dumps({"traceEvents": [*base, e, *base]}).encode())
        batch = b"[" + json.dumps(e).encode() + b"]"
        assert eventdecode._native is not None and eventdecode._native.decode_batch(batch) is None, e
        for block in (256, 1 << 20):
            if e.get("name") == "huge ts" if isinstance(e, dict) else False:  # past 2**53 µs: refused, by both
                for native in (True, False):
                    with pytest.raises(TraceLoadError, match=r"1 complete event with ts beyond .*'huge ts'"):
                        _load(path, native=native, block_size=block)
                continue
            _assert_identical(
                _load(path, native=True, block_size=block), _load(path, native=False, block_size=block), e
            )


@pytest.mark.parametrize(
    "batch",
    [
        b'[{"ph":"X","ts":1,}]',  # trailing comma
        b'[{"ph":"X","ts":01}]',  # leading zero
        b'[{"ph":"X","ts":1.}]',
        b'[{"ph":"X","ts":.5}]',
        b'[{"ph":"X","ts":1e}]',
        b'[{"ph":"X","ts":NaN}]',
        b'[{"ph":"X","ts":1e400}]',  # overflows to inf
        b'[{"ph":"X","ts":1,"ts":2}]',  # duplicate key the model reads
        b'[{"ph":"X","args":{"stream":1,"stream":2}}]',
        b'[{"p\\u0068":"X","ts":1}]',  # escaped key
        b'[{"ph":"X","name":"\\ud800"}]',  # lone surrogate
        b'[{"ph":"X","name":"a\x01b"}]',  # raw control character
        b'[{"ph":"X","other":"a\x01b"}]',
        b'[{"ph":"X","name":"\\x"}]',  # invalid escape
        b'[{"ph":"X","name":"\xff\xfe"}]',  # invalid UTF-8 in a decoded string
        b'[{"ph":"X","name":"a"}',  # unterminated
        b'[{"ph":"X","name":"a"}] x',
        b'[{"ph":"X","x":tru}]',
        b'[{"ph":"X","x":' + b"[" * 70 + b"]" * 70 + b"}]",  # deeper than the native decoder goes
        b'[{"ph":"X"} {"ph":"X"}]',
        # the typed decoder rejects these in fields it decodes and the native one skips: declined anywhere
        b'[{"ph":"s","name":"\xff"}]',  # invalid UTF-8 in a flow's name
        b'[{"ph":"X","other":"abcdefghijklmnopqrstuvwxyz\xed\xa0\x80"}]',  # an encoded surrogate
        b'[{"ph":"X","other":"\\ud800"}]',  # lone surrogate escapes
        b'[{"ph":"X","other":"\\udc00x"}]',
        b'[{"ph":"X","other":"\\ud800\\u0041"}]',
        b'[{"ph":"s","name":1e400}]',
    ],
)
def test_invalid_or_unhandled_batches_are_declined(batch: bytes) -> None:
    assert eventdecode._native is not None
    assert eventdecode._native.decode_batch(batch) is None


def test_mutated_batches_never_accepted_beyond_the_typed_decoder_and_give_the_same_columns() -> None:
    """Differential fuzzing (deterministic, small): random edits of real-looking batches. Whatever the native decoder
    accepts, the typed decoder accepts too, and both build the same model from it."""
    import random

    from dyno.trace_analysis.assembly import sparsify
    from dyno.trace_analysis.builder import TraceBuilder

    assert eventdecode._native is not None
    rng = random.Random(11)
    evs = _edge_events()
    alphabet = b'{}[],:"\\u0123456789.eE-+ \n\tnulltrueXsf\xc3\xa9\xff\x01\xed\xa0'
    snippets = [b"\\ud800", b"\\udc00", b"\\ud83d\\ude00", b"e400", b"99999999999999999999", b'"ph":"X",', b'"ts":']
    accepted = 0
    for _ in range(3000):
        k = rng.randint(1, 6)
        i = rng.randrange(len(evs) - k)
        b = bytearray(json.dumps(evs[i : i + k], indent=2 if rng.random() < 0.3 else None).encode())
        for _ in range(rng.choice([0, 1, 1, 2, 4])):
            op, p = rng.random(), rng.randrange(len(b) + 1)
            if op < 0.4:
                del b[p : p + rng.randint(1, 4)]
            elif op < 0.7:
                b[p:p] = bytes([alphabet[rng.randrange(len(alphabet))]])
            else:
                b[p:p] = rng.choice(snippets)
        batch = bytes(b)
        cols = eventdecode._native.decode_batch(batch)
        if cols is None:
            continue
        structs = eventdecode.decode_events(batch)
        assert structs is not None, batch
        a, b2 = TraceBuilder(), TraceBuilder()
        a.add(eventdecode.NativeBatch(cols), batch)
        b2.add(structs, batch)
        assert list(a.strings) == list(b2.strings), batch
        for chunks_a, chunks_b in ((a.ev_chunks, b2.ev_chunks), (a.flow_chunks, b2.flow_chunks)):
            for ca, cb in zip(chunks_a, chunks_b, strict=True):
                if chunks_a is a.ev_chunks:  # as every batch but the last is stored (the last is kept as built)
                    sparsify(ca)
                    sparsify(cb)
                for key in ca:  # dense arrays, or sparse (rows, values)
                    parts_a = (ca[key].rows, ca[key].values) if hasattr(ca[key], "rows") else (ca[key],)
                    parts_b = (cb[key].rows, cb[key].values) if hasattr(cb[key], "rows") else (cb[key],)
                    for x, y in zip(parts_a, parts_b, strict=True):
                        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), (batch, key)
        assert (a.extra, a.float_ts, a.instants, a.memory) == (b2.extra, b2.float_ts, b2.instants, b2.memory), batch
        accepted += 1
    assert accepted > 500


def test_numbers_are_parsed_like_python() -> None:
    assert eventdecode._native is not None
    texts = [
        "0", "-0", "-0.0", "1", "-1", "9223372036854775807", "-9223372036854775807", "0.1", "1e-7", "1E+3", "2.5e2",
        "1712195495519695.8", "1712195495519695.75", "123456789012345678901234567890.5", "4.9e-324",
        "2.2250738585072014e-308",
        "1.7976931348623157e308", "0.30000000000000004", "1234567.8901234567890123", "0.000000000000000000001234",
        "3.141592653589793238462643383279", "100000000000000000000000e-23", "9007199254740993.0", "5e-324",
    ]  # fmt: skip
    batch = ("[" + ",".join(f'{{"ph":"X","ts":{t},"dur":{t}}}' for t in texts) + "]").encode()
    cols = eventdecode._native.decode_batch(batch)
    assert cols is not None
    ts = np.frombuffer(cols["x_ts"], dtype=np.float64)
    for t, got in zip(texts, ts.tolist(), strict=True):
        want = float(json.loads(t))
        assert got == want and math.copysign(1, got) == math.copysign(1, want), t


def test_many_float_forms_are_parsed_exactly() -> None:
    """Random decimals of up to 21 significant digits (ns-resolution timestamps have 19), and exact halfway cases
    between two doubles (round half to even), against Python's own float parsing."""
    assert eventdecode._native is not None
    rng = np.random.default_rng(7)
    texts = []
    for _ in range(20_000):
        digits = "".join(map(str, rng.integers(0, 10, size=int(rng.integers(1, 22)))))
        point = int(rng.integers(0, len(digits) + 1))
        whole, frac = digits[:point].lstrip("0") or "0", digits[point:]
        texts.append(("-" if rng.random() < 0.2 else "") + whole + ("." + frac if frac else ".0"))
    for base in (2**53 + 1, 2**53 + 3, 2**54 + 2, 2**60 + 2**7, 2**63 - 2**9):  # halfway between two doubles
        texts += [f"{base}.0", f"{base}.00", f"{base // 10}.{base % 10}", f"{base}.0000000001"]
    batch = ("[" + ",".join(f'{{"ph":"X","ts":{t}}}' for t in texts) + "]").encode()
    cols = eventdecode._native.decode_batch(batch)
    assert cols is not None
    got = np.frombuffer(cols["x_ts"], dtype=np.float64).tolist()
    bad = [(t, g) for t, g in zip(texts, got, strict=True) if g != float(t)]
    assert not bad, bad[:5]


def test_error_messages_are_the_same_with_and_without_native(tmp_path: Path) -> None:
    data = json.dumps({"traceEvents": _edge_events()}).encode()
    mid = data.index(b'"ts": ', len(data) // 2)
    bad_json = data[:mid] + b'"ts": 12x4' + data[mid + 9 :]
    mark = data.index(b'"name": "mark')
    bad_utf8 = data[:mark] + b'"bad": "\xff\xfe", ' + data[mark:]  # in an instant event, re-parsed by orjson
    for k, content in enumerate((bad_json, bad_utf8, data[: len(data) // 2])):
        p = tmp_path / f"bad{k}.json"
        p.write_bytes(content)
        for block in (4096, 1 << 20):
            msgs = []
            for native in (True, False):
                with pytest.raises(TraceLoadError) as info:
                    _load(p, native=native, block_size=block)
                msgs.append(str(info.value))
            assert msgs[0] == msgs[1], (k, block)

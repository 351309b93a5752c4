"""trace_analysis fast load path: typed decoding (eventdecode), speculative block cuts (jsonscan), builder.

The fast path must build exactly the model the general path (orjson dicts, structural scan) builds, whatever the
block size, and fall back to it for anything it does not handle.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

from dyno.trace_analysis import eventdecode, traceopen
from dyno.trace_analysis.loader import TraceLoadError, load_trace
from dyno.trace_analysis.model import Trace

pytestmark = pytest.mark.unit

_STR_COLS = ("name", "input_dims", "input_types", "coll_name", "dtype")


def _events(n: int) -> list[Any]:
    """A varied trace: every phase the loader handles, odd types, and '},' inside strings and nested args."""
    evs: list[Any] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", "ts": 0},
    ]
    for i in range(n):
        ts = 1000 + 10 * i
        evs.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": f"aten::op_{i % 37}" if i % 11 else 'odd "}," name {[ }, ',
                "pid": 1,
                "tid": 2,
                "ts": ts if i % 3 else ts + 0.125,
                "dur": 5,
                "args": {
                    "External id": i,
                    "Input Dims": [[i % 4, 2], []] if i % 5 else [],
                    "Input type": ["float", ""],
                    "Sequence number": i if i % 7 == 0 else None,
                    "nested": {"a": {"b": "},"}, "c": [1, {"d": 2}]},
                },
            }
        )
        evs.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 2,
                "ts": ts + 1,
                "dur": 2,
                "args": {"correlation": i, "External id": i, "cbid": 211},
            }
        )
        evs.append({"ph": "s", "id": i, "pid": 1, "tid": 2, "ts": ts + 1, "cat": "ac2g", "name": "ac2g"})
        evs.append({"ph": "f", "id": i, "pid": 0, "tid": 7, "ts": ts + 3, "cat": "ac2g", "name": "ac2g", "bp": "e"})
        kernel_args: dict[str, Any] = {"stream": 7, "correlation": i, "device": 0, "External id": i}
        if i % 9 == 0:
            kernel_args.update({"Collective name": "allreduce", "In msg nelems": 64, "Group size": 8, "dtype": "Float"})
        evs.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"k{i % 5}",
                "pid": 0,
                "tid": 7,
                "ts": ts + 3,
                "dur": 4,
                "args": kernel_args,
            }
        )
        if i % 13 == 0:
            evs.append(
                {
                    "ph": "X",
                    "cat": "user_annotation",
                    "name": f"ProfilerStep#{i}",
                    "pid": 1,
                    "tid": 2,
                    "ts": ts,
                    "dur": 9,
                    "args": {"External id": i, "note": "},{"},
                }
            )
            evs.append(
                {
                    "ph": "i",
                    "name": "[memory]",
                    "pid": 1,
                    "tid": 2,
                    "ts": ts,
                    "s": "t",
                    "args": {
                        "Bytes": 512,
                        "Total Allocated": 1024 + i,
                        "Total Reserved": 4096,
                        "Device Type": 1,
                        "Device Id": 0,
                    },
                }
            )
            evs.append({"ph": "i", "name": "mark", "pid": 1, "tid": 2, "ts": ts + 0.5, "s": "t"})
            evs.append({"ph": "C", "name": "counter", "pid": 1, "ts": ts, "args": {"v": i}})
            evs.append(
                {
                    "ph": "X",
                    "cat": "cuda_sync",
                    "name": "sync",
                    "pid": 0,
                    "tid": 7,
                    "ts": ts + 8,
                    "dur": 1,
                    "args": {"stream": 4294967295, "correlation": 10**6 + i},
                }
            )
    return evs


def _write(path: Path, events: list[Any], *, indent: bool = False, gz: bool = False) -> Path:
    doc = {"schemaVersion": 1, "distributedInfo": {"rank": 2, "world_size": 4}, "traceEvents": events, "tail": "},"}
    data = json.dumps(doc, indent=2 if indent else None).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def _canonical(t: Trace) -> dict[str, Any]:
    """Everything the model holds, with string ids replaced by their strings (ids depend on intern order)."""
    s = t.strings
    out: dict[str, Any] = {}
    for col in t.events.COLUMNS:
        vals = getattr(t.events, col)
        if col in _STR_COLS:
            out[col] = [None if v < 0 else s[v] for v in vals]
        elif col in ("pid", "tid"):
            # string ids are stored as -(1 + id); a negative integer pid beyond the table stays a number
            out[col] = [s[-int(v) - 1] if -len(s) <= v < 0 else int(v) for v in vals]
        else:
            out[col] = ["nan" if isinstance(v, float) and math.isnan(v) else v for v in vals.tolist()]
    for part in ("flows", "memory", "instants"):
        obj = getattr(t, part)
        for f in obj.__struct_fields__:
            vals = getattr(obj, f)
            out[f"{part}.{f}"] = (
                [s[v] for v in vals] if (part, f) in (("flows", "cat"), ("instants", "name")) else vals.tolist()
            )
    out["extra"] = sorted(t.extra_args.items())
    out["meta"] = repr(t.meta)
    return out


def _typed_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the batches the typed decoder accepted (the native decoder turned off: it would take them first)."""
    monkeypatch.setenv(eventdecode.NATIVE_ENV, "0")
    accepted: list[int] = []
    real = eventdecode.decode_events

    def counting(batch: bytes) -> Any:
        got = real(batch)
        if got is not None:
            accepted.append(len(got))
        return got

    monkeypatch.setattr(eventdecode, "decode_events", counting)
    return accepted


def _load_general(path: Path, block_size: int) -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(eventdecode.NATIVE_ENV, "0")
        mp.setattr(eventdecode, "decode_events", lambda batch: None)
        return _canonical(load_trace(path, block_size=block_size))


@pytest.mark.parametrize("indent", [False, True])
def test_typed_path_builds_the_same_model_as_the_general_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, indent: bool
) -> None:
    path = _write(tmp_path / "t.json.gz", _events(400), indent=indent, gz=True)
    expected = _load_general(path, 1 << 20)
    assert len(expected["ts"]) > 1000 and len(expected["memory.ts"]) > 10 and expected["extra"]
    accepted = _typed_calls(monkeypatch)
    for block in (300, 4096, 20_000, 1 << 20):  # cuts land inside strings, nested args, escapes, events
        accepted.clear()
        got = _canonical(load_trace(path, block_size=block))
        assert sum(accepted) > 0, "the typed decoder was used"
        for key in expected:
            assert got[key] == expected[key], (block, key)


def test_batches_the_typed_decoder_declines_fall_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    evs = _events(60)
    n = len(evs)
    evs.insert(
        n // 3,
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "args as a list",
            "pid": 1,
            "tid": 2,
            "ts": 5,
            "args": ["not", "an", "object"],
        },
    )
    evs.insert(n // 2, 17)  # a scalar element: skipped
    evs.insert(2 * n // 3, {"ph": 1, "name": "numeric phase", "ts": 6})  # counted as another phase
    path = _write(tmp_path / "odd.json", evs)
    for block in (512, 1 << 20):
        expected = _load_general(path, block)
        got = _canonical(load_trace(path, block_size=block))
        for key in expected:
            assert got[key] == expected[key], (block, key)


def test_raw_json_args_match_the_general_serialization(tmp_path: Path) -> None:
    evs = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "a",
            "pid": 1,
            "tid": 1,
            "ts": 1,
            "dur": 1,
            "args": {"Input Dims": [[1, 2], []], "Input type": ["float", "int"]},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "b",
            "pid": 1,
            "tid": 1,
            "ts": 2,
            "dur": 1,
            "args": {"Input Dims": [[1, 2], []], "Input type": None},
        },
    ]
    p = tmp_path / "spaces.json"
    # hand-written JSON with odd spacing: the raw texts differ, the interned JSON strings must not
    p.write_bytes(json.dumps({"traceEvents": evs}).replace("[[1, 2], []]", "[[1,   2],  [ ]]", 1).encode())
    t = load_trace(p)
    assert t.events.input_dims[0] == t.events.input_dims[1]
    assert t.arg_json(int(t.events.input_dims[0])) == [[1, 2], []]
    assert t.events.input_types[1] == -1 and t.arg_json(int(t.events.input_types[0])) == ["float", "int"]


def test_invalid_json_deep_inside_events_is_reported(tmp_path: Path) -> None:
    data = json.dumps({"traceEvents": _events(300)}).encode()
    mid = data.index(b'"ts": ', len(data) // 2)
    bad = data[:mid] + b'"ts": 12x4' + data[mid + 9 :]
    p = tmp_path / "bad.json"
    p.write_bytes(bad)
    for block in (4096, 1 << 20):
        with pytest.raises(TraceLoadError, match="invalid JSON") as info:
            load_trace(p, block_size=block)
        assert info.value.path == str(p)


def test_block_boundaries_in_every_position_of_a_small_trace(tmp_path: Path) -> None:
    path = _write(tmp_path / "small.json", _events(3))
    expected = _load_general(path, 1 << 20)
    for block in range(20, 400, 7):
        got = _canonical(load_trace(path, block_size=block))
        assert got == expected, block


def test_truncated_large_trace_is_reported(tmp_path: Path) -> None:
    data = json.dumps({"traceEvents": _events(300), "after": 1}).encode()
    cut = data[: int(len(data) * 0.7)]
    plain = tmp_path / "cut.json"
    plain.write_bytes(cut)
    with pytest.raises(TraceLoadError, match="truncated"):
        load_trace(plain, block_size=4096)
    gz = tmp_path / "cut.json.gz"
    gz.write_bytes(gzip.compress(data)[:-20])
    with pytest.raises(TraceLoadError, match="truncated"):
        load_trace(gz, block_size=4096)


def test_invalid_utf8_in_a_reparsed_event_is_reported(tmp_path: Path) -> None:
    evs = _events(40)
    data = json.dumps({"traceEvents": evs}).encode()
    mark = data.index(b'"name": "mark"')
    bad = data[:mark] + b'"bad": "\xff\xfe", ' + data[mark:]  # inside an instant event (re-parsed with orjson)
    p = tmp_path / "utf8.json"
    p.write_bytes(bad)
    with pytest.raises(TraceLoadError, match="invalid JSON"):
        load_trace(p, block_size=4096)


def test_isal_and_zlib_gzip_readers_give_the_same_model_and_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    igzip = pytest.importorskip("isal.igzip")
    path = _write(tmp_path / "t.json.gz", _events(200), gz=True)
    data = path.read_bytes()
    models = []
    for reader in (igzip, gzip):
        monkeypatch.setattr(traceopen, "_GZIP", reader)
        models.append(_canonical(load_trace(path)))
        for k, content in enumerate((data[:-20], data[: len(data) // 2], data[:40] + bytes(30) + data[70:])):
            bad = tmp_path / f"bad{k}.json.gz"
            bad.write_bytes(content)
            with pytest.raises(TraceLoadError, match="truncated or corrupt gzip stream") as info:
                load_trace(bad, block_size=4096)
            assert info.value.path == str(bad), reader
    assert models[0] == models[1]


def test_args_keys_that_usually_come_together_are_read_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ "Input type" without "Input Dims", "Group size"/"dtype" without "Collective name": every path keeps them,
    whatever the batch boundaries (each key is looked for on its own)."""
    evs: list[Any] = []
    for i in range(300):
        args: dict[str, Any] = {"Input type": ["float"]} if i % 2 else {"Group size": 8, "dtype": "Float"}
        evs.append({"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1, "args": args})
    path = _write(tmp_path / "alone.json", evs)
    for block in (2000, 1 << 20):
        models = []
        for native, general in (("1", False), ("0", False), ("0", True)):
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv(eventdecode.NATIVE_ENV, native)
                if general:
                    mp.setattr(eventdecode, "decode_events", lambda batch: None)
                t = load_trace(path, block_size=block)
            assert (t.events.input_types >= 0).sum() == 150 and (t.events.group_size == 8).sum() == 150
            assert t.arg_json(int(t.events.input_types[1])) == ["float"] and t.strings[t.events.dtype[0]] == "Float"
            models.append(_canonical(t))
        assert models[0] == models[1] == models[2], block

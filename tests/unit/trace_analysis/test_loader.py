"""trace_analysis.loader / jsonscan / model: parsing, metadata, ranks, block-wise scanning, bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dyno.trace_analysis.loader import TraceLoadError, load_trace, load_traces, rank_from_filename
from dyno.trace_analysis.model import FLOW_FINISH, FLOW_START, Cat, Events

pytestmark = pytest.mark.unit


def _events() -> list[dict[str, Any]]:
    return [
        {"ph": "M", "name": "process_name", "pid": 10, "tid": 0, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 10, "tid": 11, "args": {"name": "main"}},
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 10,
            "tid": 11,
            "ts": 100.5,
            "dur": 50.25,
            "args": {"External id": 1},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": 'aten::{weird} "quoted" \\ op',
            "pid": 10,
            "tid": 11,
            "ts": 101.125,
            "dur": 10.0,
            "args": {"External id": 2, "Input Dims": [[2, 3], []], "Input type": ["float", ""], "Sequence number": 7},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 10,
            "tid": 11,
            "ts": 102.0,
            "dur": 3.5,
            "args": {"correlation": 55, "External id": 2, "cbid": 211},
        },
        {"ph": "s", "id": 55, "pid": 10, "tid": 11, "ts": 102.0, "cat": "ac2g", "name": "ac2g"},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "void k<{lambda()#1}>()",
            "pid": 0,
            "tid": 7,
            "ts": 110.001,
            "dur": 4.999,
            "args": {"correlation": 55, "stream": 7, "device": 0, "External id": 2},
        },
        {"ph": "f", "id": 55, "pid": 0, "tid": 7, "ts": 110.001, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy HtoD (Pageable -> Device)",
            "pid": 0,
            "tid": 7,
            "ts": 120.0,
            "dur": 2.0,
            "args": {"correlation": 56, "stream": 7, "device": 0, "bytes": 4096},
        },
        {
            "ph": "i",
            "cat": "cpu_instant_event",
            "name": "[memory]",
            "pid": 10,
            "tid": 11,
            "ts": 105.0,
            "s": "t",
            "args": {
                "Total Reserved": 2048,
                "Total Allocated": 1024,
                "Bytes": 512,
                "Device Id": 0,
                "Device Type": 1,
                "Addr": 1,
            },
        },
        {
            "ph": "X",
            "cat": "Trace",
            "name": "PyTorch Profiler (0)",
            "pid": "Spans",
            "tid": "PyTorch Profiler",
            "ts": 99.0,
            "dur": 60.0,
            "args": {"Op count": 0},
        },
    ]


def _doc(rank: int | None = 3, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "A100", "computeMajor": 8}]}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 8}
    doc["traceEvents"] = _events()
    doc.update({"trace_id": "abc", "host_name": "h1", "baseTimeNanoseconds": 1700000000000000000})
    doc.update(extra)
    return doc


def _write(path: Path, doc: Any, gz: bool = False) -> Path:
    data = json.dumps(doc, indent=1).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def test_columns_metadata_flows_and_memory(tmp_path: Path) -> None:
    t = load_trace(_write(tmp_path / "t.json", _doc()))
    ev = t.events
    assert len(ev) == 6 and np.all(np.diff(ev.ts) >= 0)  # sorted by ts
    assert t.meta.rank == 3 and t.meta.rank_source == "distributedInfo" and t.meta.world_size == 8
    assert t.meta.trace_id == "abc" and t.meta.host_name == "h1" and t.meta.base_time_ns == 1700000000000000000
    assert t.meta.device_properties[0]["computeMajor"] == 8 and t.meta.float_timestamps
    assert t.meta.process_names == {10: "python"} and t.meta.thread_names == {(10, 11): "main"}
    k = t.events_of(Cat.KERNEL)
    assert len(k) == 1 and k.ts[0] == pytest.approx(110.001) and k.dur[0] == pytest.approx(4.999)
    assert k.stream[0] == 7 and k.correlation[0] == 55 and k.device[0] == 0
    assert t.strings[k.name[0]] == "void k<{lambda()#1}>()"
    op = t.events_of(Cat.CPU_OP)
    assert t.strings[op.name[0]] == 'aten::{weird} "quoted" \\ op'
    assert t.arg_json(int(op.input_dims[0])) == [[2, 3], []] and op.seq[0] == 7
    m = t.events_of(Cat.GPU_MEMCPY)
    assert m.bytes[0] == 4096 and m.correlation[0] == 56
    spans = t.events_of(Cat.TRACE)
    assert spans.pid[0] < 0 and t.strings[-spans.pid[0] - 1] == "Spans"  # non-integer pid interned
    assert len(t.flows) == 2 and set(t.flows.phase.tolist()) == {FLOW_START, FLOW_FINISH}
    s_rows, f_rows = t.flows.pairs(t.cat_id("ac2g"))
    assert len(s_rows) == 1 and t.flows.ts[f_rows[0]] == pytest.approx(110.001)
    assert len(t.memory) == 1 and t.memory.total_allocated[0] == 1024 and t.memory.device_type[0] == 1
    # rare categories keep their args
    step_row = int(np.flatnonzero(ev.cat == Cat.USER_ANNOTATION)[0])
    assert t.extra_args[step_row]["External id"] == 1


def test_gzip_equals_plain_and_block_size_does_not_matter(tmp_path: Path) -> None:
    plain = load_trace(_write(tmp_path / "a.json", _doc()))
    gz = load_trace(_write(tmp_path / "a.json.gz", _doc(), gz=True))
    for block in (7, 64, 1000):  # tiny blocks split strings, escapes and events anywhere
        small = load_trace(tmp_path / "a.json.gz", block_size=block)
        for col in ("ts", "dur", "cat", "correlation", "stream", "bytes"):  # name ids depend on intern order
            assert np.array_equal(getattr(small.events, col), getattr(plain.events, col)), (block, col)
        assert len(small.flows) == len(plain.flows) and small.meta.rank == plain.meta.rank
        assert [small.strings[i] for i in small.events.name] == [plain.strings[i] for i in plain.events.name]
    assert np.array_equal(gz.events.ts, plain.events.ts)


def test_trace_events_after_metadata_and_bare_array(tmp_path: Path) -> None:
    doc = _doc()
    events = doc.pop("traceEvents")
    doc["traceEvents"] = events  # last key
    t = load_trace(_write(tmp_path / "late.json", doc), block_size=50)
    assert len(t.events) == 6 and t.meta.trace_id == "abc"
    bare = load_trace(_write(tmp_path / "bare_rank-5.json", _events()))
    assert len(bare.events) == 6 and bare.meta.rank == 5 and bare.meta.rank_source == "filename"


def test_rank_from_filename() -> None:
    assert rank_from_filename("rank-0.Apr_03.pt.trace.json.gz") == 0
    assert rank_from_filename("/x/sampled_rank_12.json") == 12
    assert rank_from_filename("trace.json") is None


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty file"),
        (b"   \n", "empty file"),
        (b"hello world", "not JSON"),
        (b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "ts": 1, "dur": 2}, {"ph": "X", "ts"', "truncated"),
        (b'{"schemaVersion": 1, "other": []}', "no traceEvents"),
        (b'{"schemaVersion": 1, "traceEvents": []}', "no trace events"),
        (b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 2}, {"ph": "X", "ts": oops}]}', "invalid JSON"),
    ],
)
def test_bad_input_names_file_and_problem(tmp_path: Path, content: bytes, reason: str) -> None:
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    with pytest.raises(TraceLoadError) as exc:
        load_trace(p)
    assert exc.value.path == str(p) and reason in exc.value.reason and str(p) in str(exc.value)


def test_truncated_gzip_and_missing_file(tmp_path: Path) -> None:
    data = gzip.compress(json.dumps(_doc()).encode())
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceLoadError, match="truncated"):
        load_trace(p)
    with pytest.raises(TraceLoadError, match="no such file"):
        load_trace(tmp_path / "nope.json")


def test_folder_of_ranks_reports_bad_rank_and_duplicates(tmp_path: Path) -> None:
    _write(tmp_path / "r0.json.gz", _doc(rank=0), gz=True)
    _write(tmp_path / "r1.json", _doc(rank=1))
    _write(tmp_path / "r1_again.json", _doc(rank=1))
    (tmp_path / "r2.json").write_bytes(b'{"traceEvents": [{"ph": "X"')
    (tmp_path / "notes.txt").write_text("ignored")
    m = load_traces(tmp_path)
    assert m.ranks == [0, 1] and len(m) == 2 and m[1].meta.rank == 1
    reasons = {Path(e.path).name: e.reason for e in m.errors}
    assert "truncated" in reasons["r2.json"] and "duplicate rank 1" in reasons["r1_again.json"]


def test_model_helpers(tmp_path: Path) -> None:
    t = load_trace(_write(tmp_path / "t.json", _doc()))
    assert t.has_gpu and list(t.gpu_devices()) == [0]
    mask = t.name_mask(t.events, lambda s: s.startswith("cuda"))
    assert mask.sum() == 1 and t.name(int(np.flatnonzero(mask)[0])) == "cudaLaunchKernel"
    assert t.events_of(Cat.KERNEL) is t.events_of(Cat.KERNEL)  # cached
    assert t.span[0] == 99.0 and t.nbytes > 0


def test_scanner_handles_escapes_and_brackets_in_strings_at_any_block_boundary(tmp_path: Path) -> None:
    tricky = ["ends with backslash \\", 'quote " and \\" inside', "braces { [ ] } ]]", "\\\\\\", 'x\\"}']
    doc = {
        "meta": {"note": "traceEvents [ { fake", "list": [1, [2, {"a": "]"}]]},
        "traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": i, "dur": 1} for i, n in enumerate(tricky)
        ],
        "after": {"x": "}"},
    }
    p = tmp_path / "tricky.json"
    p.write_bytes(json.dumps(doc).encode())
    for block in range(1, 41):
        t = load_trace(p, block_size=block)
        assert [t.strings[i] for i in t.events.name] == tricky, block
        assert t.meta.other["after"] == {"x": "}"} and t.meta.other["meta"]["note"] == "traceEvents [ { fake"


def test_lazy_and_sparse_columns_equal_dense_gathers(tmp_path: Path) -> None:
    t = load_trace(_write(tmp_path / "t.json", _doc()))
    ev = t.events
    assert ev._sparse, "mostly-absent args columns are stored sparse"
    rows = np.array([5, 1, 3])
    sub = ev.take(rows)
    for col in Events.COLUMNS:
        assert np.array_equal(getattr(sub, col), getattr(ev, col)[rows]), col
    sub2 = sub.take(np.array([True, False, True]))  # nested lazy take maps to root rows
    assert sub2.index.tolist() == [5, 3] and np.array_equal(sub2.ts, ev.ts[[5, 3]])
    assert ev.take(np.ones(len(ev), dtype=bool)) is ev and sub.materialize().nbytes > 0


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    p = tmp_path / "bom.json"
    p.write_bytes(b"\xef\xbb\xbf" + json.dumps(_doc()).encode())
    assert len(load_trace(p).events) == 6


def test_folder_in_dyno_cli_trace_layout_is_walked(tmp_path: Path) -> None:
    """<trace_id>/<host>/<file> with a manifest and a partial download beside the traces."""
    from dyno.trace_analysis.loader import find_trace_files

    root = tmp_path / "abc123"
    for host, rank in (("node1_1778", 0), ("node2_1778", 1)):
        (root / host).mkdir(parents=True)
        (root / host / f"{host}_{100 + rank}.pt.trace.json").write_text(
            json.dumps(
                {
                    "distributedInfo": {"rank": rank, "world_size": 2},
                    "traceEvents": [
                        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2, "pid": 1, "tid": 1}
                    ],
                }
            )
        )
    (root / "manifest.json").write_text("{}")
    (root / "node1_1778" / "dynod-record.json").write_text("{}")  # as in the daemon's own trace folders
    (root / "node1_1778" / ".abc123.7.part").write_text("partial")
    found = find_trace_files(root)
    assert [f.name for f in found] == ["node1_1778_100.pt.trace.json", "node2_1778_101.pt.trace.json"]
    mrt = load_traces(root)
    assert sorted(mrt.ranks) == [0, 1] and not mrt.errors

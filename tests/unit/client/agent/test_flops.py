"""`with_flops` traces carry FLOP estimates: torch 2.13 computes them (key_averages() shows them) but its Chrome
export writes none, so `dyno-cli trace --with-flops` produced files without a single "flops" arg. The agent adds them
while copying the export. Real torch.profiler runs through the agent's own profiler and export."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from dyno.client.agent.flops import FlopArgs, flops_note
from dyno.client.agent.profiler import profiler_factory
from dyno.client.agent.trace import AgentTraceSpec, _export, write_trace_file

pytestmark = pytest.mark.unit
torch = pytest.importorskip("torch")


def _trace(tmp_path: Path, work, *, with_flops: bool = True) -> tuple[list[dict], str]:
    spec = AgentTraceSpec(
        trace_id="t-flops", output_path=tmp_path / "f.pt.trace.json.gz", duration_ms=10, with_flops=with_flops
    )
    profiler = profiler_factory(spec, all_threads=True)()
    profiler.start()
    work()
    profiler.stop()
    result = _export(profiler, spec)
    doc = json.loads(gzip.decompress(result.path.read_bytes()))
    assert doc["trace_id"] == "t-flops"
    return doc["traceEvents"], result.note


def _matmuls() -> None:
    model = torch.nn.Linear(64, 16)
    x = torch.randn(32, 64)
    for _ in range(3):
        model(x)
        torch.mm(x, x.T)


def test_matmuls_get_flops_args(tmp_path: Path) -> None:
    events, note = _trace(tmp_path, _matmuls)
    flops = {(e["name"], e["args"]["flops"]) for e in events if "flops" in e.get("args", {})}
    # 2*M*N*K: addmm (32x64 @ 64x16), mm (32x64 @ 64x32)
    assert flops == {("aten::addmm", 2 * 32 * 64 * 16), ("aten::mm", 2 * 32 * 64 * 32)}
    counted = [e for e in events if "flops" in e.get("args", {})]
    assert len(counted) == 6 and all(e["cat"] == "cpu_op" for e in counted)
    assert note == ""


def test_without_with_flops_nothing_is_added(tmp_path: Path) -> None:
    events, note = _trace(tmp_path, _matmuls, with_flops=False)
    assert not any("flops" in e.get("args", {}) for e in events) and note == ""


def test_a_trace_without_matmuls_says_why_it_has_no_flops(tmp_path: Path) -> None:
    events, note = _trace(tmp_path, lambda: torch.randn(100).relu().sum())
    assert not any("flops" in e.get("args", {}) for e in events)
    assert note.startswith("with_flops: no op in the trace has a FLOP estimate")


def test_flop_args_filter_and_the_note_when_nothing_matched(tmp_path: Path) -> None:
    args = FlopArgs({4: 100})
    assert args(b'"a": 1, "Ev Idx": 4\n') == b'"a": 1, "Ev Idx": 4, "flops": 100\n'
    assert args(b'"Ev Idx": 40\n') == b'"Ev Idx": 40\n' and args(b'"name": "x"\n') == b'"name": "x"\n'
    assert args.added == 1
    assert "numbers no events to attach them to" in flops_note({1: 5}, FlopArgs({1: 5}))
    # the filter runs over whole lines, the head (where trace_id goes) included
    raw = tmp_path / "raw.json"
    raw.write_bytes(b'{\n  "traceEvents": [\n  {"args": {\n    "Ev Idx": 4\n  }}\n]}\n')
    write_trace_file(raw, tmp_path / "out.json", "tid", line_filter=args)
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["trace_id"] == "tid" and doc["traceEvents"][0]["args"] == {"Ev Idx": 4, "flops": 100}


def test_every_event_of_a_multi_block_export_is_annotated(tmp_path: Path) -> None:
    # Several MiB: the copy goes in blocks, each completed to a whole line, so no "Ev Idx" is cut in two.
    n = 30_000
    events = ",\n".join(
        f'  {{"ph": "X", "name": "aten::mm", "args": {{"pad": "{"x" * 60}", "Ev Idx": {i}}}}}' for i in range(n)
    )
    raw = tmp_path / "raw.json"
    raw.write_text('{\n  "traceEvents": [\n' + events + "\n]}\n")
    assert raw.stat().st_size > 2 * 1024 * 1024
    args = FlopArgs({i: i + 1 for i in range(n)})
    write_trace_file(raw, tmp_path / "out.json.gz", "tid", line_filter=args)
    doc = json.loads(gzip.decompress((tmp_path / "out.json.gz").read_bytes()))
    assert args.added == n and [e["args"]["flops"] for e in doc["traceEvents"]] == list(range(1, n + 1))

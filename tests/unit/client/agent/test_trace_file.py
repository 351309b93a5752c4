"""The agent's trace file: a libkineto export that could not write (a full trace dir) is reported with that reason
and its temporary file removed; the copy is compressed at gzip's default level."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from dyno.client.agent.trace import AgentTraceSpec, TraceFailed, _export
from dyno.client.agent.trace_file import write_trace_file

pytestmark = pytest.mark.unit


class FullDiskProfiler:
    """export_chrome_trace as libkineto does it on a full disk: a partial `<path>.tmp`, no `<path>`, no error."""

    def export_chrome_trace(self, path: str) -> None:
        Path(path + ".tmp").write_bytes(b'{"traceEvents": [' + b" " * 4000)


def test_a_failed_export_is_reported_as_such_and_leaves_nothing(tmp_path: Path) -> None:
    spec = AgentTraceSpec(trace_id="t1", output_path=tmp_path / "host_42.pt.trace.json.gz", duration_ms=100)
    with pytest.raises(TraceFailed) as e:
        _export(FullDiskProfiler(), spec)
    assert f"the profiler could not write its trace to {tmp_path}" in str(e.value)
    assert "No such file" not in str(e.value)
    assert list(tmp_path.iterdir()) == []


# The trace file is compressed at gzip's default level (6).


# gzip header byte 8 (XFL), set from the deflate level: 2 = slowest (level 9), 4 = fastest (level 1), 0 in between
_XFL_LEVEL_9 = 2


def test_trace_file_is_compressed_at_gzip_default_level(tmp_path: Path) -> None:
    events = [{"ph": "X", "name": f"aten::op{i % 17}", "ts": i * 3, "dur": 2, "pid": 1, "tid": 1} for i in range(5000)]
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}, indent=1))
    out = tmp_path / "host_1.pt.trace.json.gz"
    size = write_trace_file(raw, out, "trace-1")
    header = out.read_bytes()[:10]
    assert header[8] != _XFL_LEVEL_9
    assert header[8] == 0  # levels 2-8; GZIP_LEVEL is 6
    assert size == out.stat().st_size
    doc = json.loads(gzip.decompress(out.read_bytes()))
    assert doc["trace_id"] == "trace-1" and len(doc["traceEvents"]) == 5000

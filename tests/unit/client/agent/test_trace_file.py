"""The agent's export when libkineto cannot write (a full trace dir): libkineto (torch 2.13) logs "Failed to
write to log file!", raises nothing and leaves `<path>.tmp`; the agent must report that reason and remove it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dyno.client.agent.trace import TraceFailed, TraceSpec, _export

pytestmark = pytest.mark.unit


class FullDiskProfiler:
    """export_chrome_trace as libkineto does it on a full disk: a partial `<path>.tmp`, no `<path>`, no error."""

    def export_chrome_trace(self, path: str) -> None:
        Path(path + ".tmp").write_bytes(b'{"traceEvents": [' + b" " * 4000)


def test_a_failed_export_is_reported_as_such_and_leaves_nothing(tmp_path: Path) -> None:
    spec = TraceSpec(trace_id="t1", output_path=tmp_path / "host_42.pt.trace.json.gz", duration_ms=100)
    with pytest.raises(TraceFailed) as e:
        _export(FullDiskProfiler(), spec)
    assert f"the profiler could not write its trace to {tmp_path}" in str(e.value)
    assert "No such file" not in str(e.value)
    assert list(tmp_path.iterdir()) == []

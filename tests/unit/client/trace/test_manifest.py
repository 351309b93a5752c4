"""manifest.json of a cluster trace folder (dyno.client.trace.manifest): written atomically, read back."""

from __future__ import annotations

from pathlib import Path

import pytest
from host_records import fetched_proc, host_record

from dyno.client.trace.manifest import MANIFEST_NAME, build_manifest, read_manifest, write_manifest
from dyno.client.trace.records import ProcRecord

pytestmark = pytest.mark.unit


def test_manifest_is_written_atomically_with_errors_listed(tmp_path: Path) -> None:
    hosts = [
        host_record("a", "done", fetched_proc(1), ProcRecord(2, state="failed", error="no optimizer step")),
        host_record("b", "failed", ProcRecord(3, state="lost", error="gone"), error="cannot reach dynod"),
    ]
    hosts[1].error_type = "Unavailable"
    m = build_manifest(
        trace_id="t1",
        request={"job_id": "j", "trace_id": "t1", "start_time_ms": "1700000000000"},
        hosts=hosts,
        status="partial",
        requested_ms=1699999994000,
        start_fanout_s=0.01,
        exit_code=3,
        finished_ms=1700000001000,
    )
    write_manifest(tmp_path, m)
    write_manifest(tmp_path, {**m, "status": "partial"})  # replaced in place
    assert [p.name for p in tmp_path.iterdir()] == [MANIFEST_NAME]  # no temp file left behind
    back = read_manifest(tmp_path)
    assert back["schema"] == "dyno.trace-manifest" and back["version"] == 1 and back["job_id"] == "j"
    assert back["timings"]["start_time_ms"] == 1700000000000 and back["timings"]["elapsed_s"] == 7.0
    assert back["summary"] == {"hosts": 2, "hosts_failed": 1, "processes": 3, "fetched": 1, "bytes": 10}
    assert back["errors"] == ["b:1778: cannot reach dynod (Unavailable)", "a:1778 pid 2: no optimizer step"]
    assert [p["host"] for p in back["processes"]] == ["a:1778", "a:1778", "b:1778"]

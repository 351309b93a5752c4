"""The trace records a starting dynod reads back (dyno.daemon.tracing.recorded, over records written by the
journal's own writer): a record not believed (a field out of range, a record that is a symlink) is skipped with a
WARNING, a folder without a record (a trace still running at the restart) is skipped in silence, and no record
read says an INFO line (its callers log one line for all)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from trace_records import write_trace_record

from dyno.daemon.tracing.recorded import recorded_traces

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000


def _record(trace_dir: Path, trace_id: str, seconds_ago: int) -> Path:
    """A finished one-process trace whose profiler ran 1 s, its record dated `seconds_ago` before T0."""
    return write_trace_record(
        trace_dir,
        trace_id,
        created_ms=T0,
        running_ms=T0 + 1000,
        updated_ms=T0 + 2000,
        recorded_ms=T0 + 2000,
        mtime_s=T0 / 1000 - seconds_ago,
    )


@pytest.mark.parametrize(
    ("field", "corrupted"),
    [
        ("size_bytes", (b'"size_bytes": 5', b'"size_bytes": -5')),
        ("running_ms", (b'"running_ms": ', b'"running_ms": -')),
    ],
)
def test_records_not_believed_are_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, field: str, corrupted: tuple[bytes, bytes]
) -> None:
    traces = tmp_path / "traces"
    _record(traces, "good", seconds_ago=30)
    bad = _record(traces, "bad", seconds_ago=20)
    data = bad.read_bytes()
    assert corrupted[0] in data  # the field this case corrupts is written
    bad.write_bytes(data.replace(*corrupted))
    planted = _record(traces, "planted", seconds_ago=10)
    data = planted.read_bytes()
    planted.unlink()
    (tmp_path / "elsewhere.json").write_bytes(data)
    planted.symlink_to(tmp_path / "elsewhere.json")
    (traces / "no-record").mkdir()  # a folder without a record: a trace still running at the restart
    with caplog.at_level(logging.INFO):
        views = recorded_traces(traces)
    assert [v.trace_id for v in views] == ["good"]
    warned = sorted(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert len(warned) == 2
    assert "bad" in warned[0] and field in warned[0]
    assert "planted" in warned[1] and "symlink" in warned[1]
    assert not [r for r in caplog.records if r.levelno == logging.INFO]  # quiet: the caller logs one line

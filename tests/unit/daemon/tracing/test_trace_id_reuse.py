"""A caller-chosen trace id whose folder is already in the trace dir (a trace from before a daemon restart, or
one evicted from memory) must be refused as "already in use", not traced again into the same folder, which
overwrote the earlier trace's files."""

from __future__ import annotations

from pathlib import Path

import pytest

from dyno.daemon.registry import PROTOCOL_AGENT, ProcessRecord, ProcessRegistry
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import TraceRequestError, TraceSpec

pytestmark = pytest.mark.unit


def test_trace_id_with_a_folder_on_disk_is_refused(tmp_path: Path) -> None:
    reg = ProcessRegistry(silent_timeout_s=30, is_alive=lambda pid: True)
    tm = TraceManager(reg, tmp_path / "traces", "hostA")
    reg.register(ProcessRecord(pid=7, job_id="J", protocol=PROTOCOL_AGENT, session_id="s7"))
    earlier = tmp_path / "traces" / "exp1" / "hostA_7.pt.trace.json.gz"
    earlier.parent.mkdir(parents=True)
    earlier.write_bytes(b"an earlier run's trace")
    with pytest.raises(TraceRequestError, match="'exp1' is already in use on this host"):
        tm.start(TraceSpec(job_id="J", duration_ms=100, trace_id="exp1"))
    assert earlier.read_bytes() == b"an earlier run's trace"
    assert tm.start(TraceSpec(job_id="J", duration_ms=100, trace_id="exp2")).triggered


def test_unknown_trace_with_a_folder_on_disk_says_the_daemon_restarted(tmp_path: Path) -> None:
    """dyno-cli trace following a trace across a daemon restart got only "no trace 'exp1' on host hostA"."""
    from dyno.daemon.tracing.values import UnknownTraceError

    tm = TraceManager(ProcessRegistry(silent_timeout_s=30, is_alive=lambda pid: True), tmp_path / "traces", "hostA")
    (tmp_path / "traces" / "exp1").mkdir(parents=True)
    for call in (tm.get, tm.cancel):
        with pytest.raises(UnknownTraceError) as e:
            call("exp1")
        assert "no trace 'exp1' on host hostA" in str(e.value)
        assert "restarted" in str(e.value) and str(tmp_path / "traces" / "exp1") in str(e.value)
    with pytest.raises(UnknownTraceError) as e:
        tm.get("never")
    assert str(e.value) == "no trace 'never' on host hostA"

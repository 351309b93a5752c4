"""StartTrace on a full trace dir names the trace's folder and the free space (mkstemp's error names no path), and
leaves nothing half-made."""

from __future__ import annotations

import errno
from pathlib import Path

import grpc
import pytest
from grpc_context import Aborted, AbortingContext

from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing import trust
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.service import TraceRpcs
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def test_a_full_disk_names_the_folder_and_the_free_space(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    registry = ProcessRegistry(is_alive=lambda pid: True, uid_of=lambda pid: 1000)
    registry.register(RegisteredProcess(pid=4242, job_id="full", protocol=PROTOCOL_AGENT, connected=True))
    manager = TraceManager(registry, tmp_path / "traces", "h")
    rpcs = TraceRpcs(manager, registry, "h")

    def full(folder: Path, name: str, data: bytes, **_: object) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device")  # as mkstemp's write fails: no file name

    monkeypatch.setattr(trust, "write_file_atomically", full)
    with pytest.raises(Aborted) as e:
        rpcs.StartTrace(dyno_pb2.TraceRequest(job_id="full", duration_ms=500, trace_id="t1"), AbortingContext())
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
    folder = tmp_path / "traces" / "t1"
    assert e.value.details.startswith(f"cannot prepare the trace dir on this host: {folder}: No space left on device (")
    assert "bytes free there)" in e.value.details
    assert not folder.exists()  # the folder it had just made is gone again
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [
        f"StartTrace: cannot prepare the trace dir: {e.value.details.split('host: ', 1)[1]}"
    ]

"""dyno.diskspace.free_space_note: the one "N bytes free there" note that the agent's failed export and the daemon's
unfinished kineto file both add, and what each says when the free space cannot be read."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from dyno import diskspace
from dyno.client.agent import trace as agent_trace
from dyno.client.agent.trace import AgentTraceSpec, TraceFailed, _export
from dyno.daemon.tracing import kineto_leftovers
from dyno.daemon.tracing.kineto_leftovers import discard_unfinished_kineto_file

pytestmark = pytest.mark.unit


def _no_disk_usage(path: object) -> object:
    raise PermissionError(13, "Permission denied")


def test_note_gives_the_free_bytes_of_the_directory(tmp_path: Path) -> None:
    note = diskspace.free_space_note(tmp_path)
    m = re.fullmatch(r"(\d+) bytes free there", note)
    assert m is not None, note
    assert int(m.group(1)) <= shutil.disk_usage(tmp_path).total


def test_note_is_empty_when_disk_usage_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert diskspace.free_space_note(tmp_path / "missing") == ""  # FileNotFoundError: no note, no error
    monkeypatch.setattr(diskspace.shutil, "disk_usage", _no_disk_usage)
    assert diskspace.free_space_note(tmp_path) == ""


class _FullDiskProfiler:
    """libkineto on a full disk: a partial `<path>.tmp`, no `<path>`, no error."""

    def export_chrome_trace(self, path: str) -> None:
        Path(path + ".tmp").write_bytes(b'{"traceEvents": [')


def _agent_error(tmp_path: Path) -> str:
    spec = AgentTraceSpec(trace_id="t1", output_path=tmp_path / "host_42.pt.trace.json.gz", duration_ms=100)
    with pytest.raises(TraceFailed) as e:
        _export(_FullDiskProfiler(), spec)
    return str(e.value)


def _daemon_reason(tmp_path: Path) -> str:
    path = tmp_path / "hostA_300.pt.trace.json"
    Path(str(path) + ".tmp").write_bytes(b"{")
    return discard_unfinished_kineto_file(path)


def test_agent_and_daemon_share_one_helper() -> None:
    assert agent_trace.free_space_note is diskspace.free_space_note
    assert kineto_leftovers.free_space_note is diskspace.free_space_note


def test_agent_and_daemon_add_the_shared_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diskspace.shutil, "disk_usage", lambda p: SimpleNamespace(total=10, used=9, free=1))
    assert _agent_error(tmp_path) == f"the profiler could not write its trace to {tmp_path} (1 bytes free there)"
    assert "(a failed write? removed it; 1 bytes free there)" in _daemon_reason(tmp_path)


def test_agent_and_daemon_leave_the_note_out_when_disk_usage_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(diskspace.shutil, "disk_usage", _no_disk_usage)
    assert _agent_error(tmp_path) == f"the profiler could not write its trace to {tmp_path}"
    assert "(a failed write? removed it);" in _daemon_reason(tmp_path)

"""dynod (root) works inside its trace dir: it makes folders there and chmods them 1733, writes records, serves
files and deletes old folders. The default, /tmp/dyno-traces, can be created by any local user before dynod does
(or again after systemd-tmpfiles aged it out of /tmp); in a trace dir another user controls, that user can swap a
folder for a symlink between dynod's mkdir and chmod (a root chmod 1733 of /etc) or its record write (a root-owned
file anywhere). A trace dir is used only when nobody but root and dynod's user can change it or any folder above it.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import grpc
import pytest
from grpc_context import Aborted, AbortingContext

from dyno import trace_layout
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing import journal as tj
from dyno.daemon.tracing import retention, trust
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.service import TraceRpcs
from dyno.daemon.tracing.values import ProcessTraceView, TraceSpec, TraceState, TraceView, UnknownTraceError
from dyno.logthrottle import ThrottledLog
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit

OTHER_UID = 65534  # nobody: "another local user"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


@pytest.fixture(autouse=True)
def _fresh_warning_throttle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retention, "_skipped", ThrottledLog(retention.log, every_s=3600.0, max_keys=8))


def _dir(path: Path, mode: int = 0o755) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, mode)
    return path


def test_a_trace_dir_of_dynods_own_is_trusted(tmp_path: Path) -> None:
    trace_dir = _dir(tmp_path / "traces")
    assert trust.trace_dir_problem(trace_dir) is None
    assert trust.trace_dir_problem(tmp_path / "not-yet" / "made") is None  # dynod makes what is missing
    _dir(tmp_path / "sticky", 0o1777)  # like /tmp: others cannot rename what they do not own
    assert trust.trace_dir_problem(_dir(tmp_path / "sticky" / "traces")) is None
    assert trust.make_trace_dir(trace_dir, "t1").is_dir()


def test_a_trace_dir_others_may_write_is_refused(tmp_path: Path) -> None:
    trace_dir = _dir(tmp_path / "traces", 0o777)
    problem = trust.trace_dir_problem(trace_dir)
    assert problem is not None and "writable by other users" in problem and str(trace_dir) in problem
    with pytest.raises(OSError, match="writable by other users"):
        trust.make_trace_dir(trace_dir, "t1")
    assert not (trace_dir / "t1").exists()


def test_a_folder_above_it_that_others_may_write_without_the_sticky_bit_is_refused(tmp_path: Path) -> None:
    shared = _dir(tmp_path / "shared", 0o777)  # anyone may rename "traces" away and put their own in its place
    trace_dir = _dir(shared / "traces")
    problem = trust.trace_dir_problem(trace_dir)
    assert problem is not None and str(shared) in problem and "sticky" in problem


def test_a_symlink_others_may_replace_is_refused(tmp_path: Path) -> None:
    real = _dir(tmp_path / "real")
    shared = _dir(tmp_path / "shared", 0o777)
    (shared / "traces").symlink_to(real)
    problem = trust.trace_dir_problem(shared / "traces")
    assert problem is not None and str(shared) in problem


@as_root
def test_a_trace_dir_another_user_made_first_is_refused_for_traces_records_and_retention(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """/tmp/dyno-traces squatted: owned by another user, who can rename anything in it."""
    trace_dir = _dir(tmp_path / "traces")
    kept = trust.make_trace_dir(trace_dir, "old")  # a trace from when the dir was still dynod's
    t = time.time() - 7200
    os.utime(kept, (t, t))
    os.chown(trace_dir, OTHER_UID, OTHER_UID)
    problem = trust.trace_dir_problem(trace_dir)
    assert problem is not None and f"owned by uid {OTHER_UID}" in problem

    with pytest.raises(OSError, match=f"owned by uid {OTHER_UID}"):
        trust.make_trace_dir(trace_dir, "t1")
    assert not (trace_dir / "t1").exists()

    # the owner swapped a trace's folder for a symlink to a folder of root's: no record is written through it
    target = _dir(tmp_path / "etc")
    (trace_dir / "t2").symlink_to(target)
    proc = ProcessTraceView(1, "j", 0, PROTOCOL_AGENT, TraceState.DONE, "")
    view = TraceView("t2", TraceSpec(job_id="j", duration_ms=500), (proc,), True, 0)
    assert tj.write_record(trace_dir, view, "h", 1) is None
    assert list(target.iterdir()) == []

    caplog.set_level(logging.WARNING)
    result = retention.enforce_retention(trace_dir, max_bytes=0, max_age_s=60)
    assert result.removed == () and kept.is_dir()  # deletes nothing it cannot trust
    assert any("owned by uid" in r.getMessage() and "retention" in r.getMessage() for r in caplog.records)


@as_root
def test_start_trace_in_a_squatted_trace_dir_fails_with_the_reason(tmp_path: Path) -> None:
    registry = ProcessRegistry(is_alive=lambda pid: True, uid_of=lambda pid: 1000)
    registry.register(RegisteredProcess(pid=4242, job_id="sq", protocol=PROTOCOL_AGENT, connected=True))
    trace_dir = _dir(tmp_path / "traces")
    os.chown(trace_dir, OTHER_UID, OTHER_UID)
    rpcs = TraceRpcs(TraceManager(registry, trace_dir, "h"), registry, "h")
    with pytest.raises(Aborted) as e:
        rpcs.StartTrace(dyno_pb2.TraceRequest(job_id="sq", duration_ms=500, trace_id="t1"), AbortingContext())
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert f"owned by uid {OTHER_UID}" in e.value.details
    assert list(trace_dir.iterdir()) == []


def _nest(folder: Path, depth: int) -> Path:
    """`depth` folders one inside the other (through dir fds: the whole path is longer than PATH_MAX)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        with open(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "wb") as f:
            f.write(b"x" * 10)
        os.symlink(str(folder.parent.parent / "outside"), "link", dir_fd=fd)
    finally:
        os.close(fd)
    return folder


def test_a_folder_tree_nested_deeper_than_pythons_recursion_limit_is_measured_and_deleted(tmp_path: Path) -> None:
    """Any trainer may create folders in a trace folder (1733). Nested 1200 deep, they must not make the size walk
    or the removal raise RecursionError (as a recursive walk and shutil.rmtree do) at every retention pass: no trace
    would ever be deleted again (the disk fills), and dynod, whose start runs a pass, would not start."""
    outside = _dir(tmp_path / "outside")
    (outside / "keep").write_text("not dynod's")
    trace_dir = _dir(tmp_path / "traces")
    deep = _nest(trust.make_trace_dir(trace_dir, "deep"), 1200)
    (deep / "link-at-top").symlink_to(outside)
    old = trust.make_trace_dir(trace_dir, "old")
    (old / "h_1.pt.trace.json").write_bytes(b"{}")
    assert retention.tree_size(deep) == (deep / trace_layout.MARKER_NAME).stat().st_size + 10
    t = time.time() - 7200
    for d in (deep, old):
        os.utime(d, (t, t))
    result = retention.enforce_retention(trace_dir, max_bytes=1 << 30, max_age_s=60)
    assert sorted(result.removed) == ["deep", "old"]
    assert list(trace_dir.iterdir()) == []
    assert (outside / "keep").read_text() == "not dynod's"  # symlinks are removed, never followed


@as_root
def test_no_file_is_served_from_a_trace_dir_that_changed_hands(tmp_path: Path) -> None:
    """A trace finished while the dir was dynod's; then another user took the dir (systemd-tmpfiles aged it out of
    /tmp and they made it again, say): its folders may be their symlinks now, so nothing there is served."""
    registry = ProcessRegistry(is_alive=lambda pid: True, uid_of=lambda pid: 0)
    registry.register(RegisteredProcess(pid=4242, job_id="j", protocol=PROTOCOL_AGENT, connected=True, session_id="s"))
    trace_dir = _dir(tmp_path / "traces")
    tm = TraceManager(registry, trace_dir, "h")
    tm.agent_attach(4242, "s")
    r = tm.start(TraceSpec(job_id="j", duration_ms=500, trace_id="t1"))
    Path(r.triggered[0].path).write_text("{}")
    tm.agent_report(4242, "t1", TraceState.DONE)
    assert tm.trace_file("t1", 4242) == Path(r.triggered[0].path)
    os.chown(trace_dir, OTHER_UID, OTHER_UID)
    with pytest.raises(UnknownTraceError, match=f"owned by uid {OTHER_UID}"):
        tm.trace_file("t1", 4242)

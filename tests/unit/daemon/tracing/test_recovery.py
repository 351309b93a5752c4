"""Finished traces survive a daemon restart: the record a finished trace leaves in its folder (trace_journal), its
validation as untrusted input, lazy recovery by a new TraceManager, the memory cap and retention."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from fake_proc import no_proc_identifier

from dyno.daemon.config import DaemonConfig
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing import journal as tj
from dyno.daemon.tracing import retention, streaming
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.subsystem import Tracing
from dyno.daemon.tracing.table import DEFAULT_LIMITS, TraceLimits
from dyno.daemon.tracing.values import TraceSpec, TraceState, UnknownTraceError
from dyno.filechunks import checksum_of, new_digest

pytestmark = pytest.mark.unit


def _test_user(pid: int) -> int:
    # the fake pids' trainer is this test, which writes their files: a fake pid that is a real process (a kernel
    # thread, owned by root) must not make the daemon's ownership check refuse them when the tests run as non-root
    return os.getuid()


FULL_SPEC = TraceSpec(
    job_id="36199_0",
    pids=(7, 8),
    process_limit=3,
    duration_ms=250,
    start_time_ms=None,
    record_shapes=True,
    profile_memory=True,
    with_stack=True,
    with_flops=True,
    with_modules=True,
    trace_id="exp1",
)


def manager(
    trace_dir: Path, hostname: str = "hostA", limits: TraceLimits = DEFAULT_LIMITS
) -> tuple[ProcessRegistry, TraceManager]:
    reg = ProcessRegistry(silent_timeout_s=30, is_alive=lambda pid: True, uid_of=_test_user)
    return reg, TraceManager(reg, trace_dir, hostname, limits=limits, kineto_identifier=no_proc_identifier())


def finish(
    tm: TraceManager, reg: ProcessRegistry, spec: TraceSpec, done: dict[int, bytes], failed: tuple[int, ...] = ()
):  # type: ignore[no-untyped-def]
    """Run an agent trace of these pids to its end: `done` pids write their file, `failed` ones report failure."""
    for pid in (*done, *failed):
        if reg.get(pid) is None:
            reg.register(
                RegisteredProcess(
                    pid=pid, job_id=spec.job_id, protocol=PROTOCOL_AGENT, rank=pid % 4, session_id=f"s{pid}"
                )
            )
    r = tm.start(spec)
    paths = {v.pid: Path(v.path) for v in r.triggered}
    for pid, data in done.items():
        paths[pid].write_bytes(data)
        tm.agent_report(pid, r.trace_id, TraceState.DONE)
    for pid in failed:
        tm.agent_report(pid, r.trace_id, TraceState.FAILED, "CUDA out of memory")
    return r.trace_id, paths


def digest(data: bytes) -> str:
    d = new_digest()
    d.update(data)
    return checksum_of(d)


def test_round_trip_after_restart(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    reg, tm = manager(traces)
    tid, paths = finish(tm, reg, FULL_SPEC, {7: b"seven" * 1000}, failed=(8,))
    before = tm.get(tid)
    record = traces / tid / tj.RECORD_NAME
    assert record.is_file() and oct(record.stat().st_mode & 0o777) == "0o644"

    _reg2, tm2 = manager(traces)  # the restarted daemon: nothing in memory
    after = tm2.get(tid)
    assert after == before  # spec (every option), states, errors, sizes, paths, times, finished
    assert after.spec == FULL_SPEC
    states = {p.pid: p for p in after.processes}
    assert states[7].state == TraceState.DONE and states[7].size_bytes == 5000 and states[7].rank == 3
    assert states[8].state == TraceState.FAILED and states[8].error == "CUDA out of memory"
    path = tm2.trace_file(tid, 7)
    assert path == paths[7]
    chunks = list(streaming.iter_chunks(path, 1024))
    assert b"".join(c.data for c in chunks) == b"seven" * 1000
    assert chunks[-1].checksum == digest(b"seven" * 1000)
    with pytest.raises(UnknownTraceError, match="has no file: failed"):
        tm2.trace_file(tid, 8)
    assert tm2.cancel(tid).processes == before.processes  # cancelling a recovered (finished) trace changes nothing
    assert tm2.active_traces() == 0


def test_record_written_at_each_processs_end(tmp_path: Path) -> None:
    """Not only when every process is final: a restarted daemon knows what had ended (tests/unit/
    test_recovery_disk_state.py); a process that had not picked the request up is failed there."""
    traces = tmp_path / "traces"
    reg, tm = manager(traces)
    for pid in (7, 8):
        reg.register(RegisteredProcess(pid=pid, job_id="J", protocol=PROTOCOL_AGENT, session_id=f"s{pid}"))
    r = tm.start(TraceSpec(job_id="J", duration_ms=100, trace_id="t1"))
    record = traces / "t1" / tj.RECORD_NAME
    Path(r.triggered[0].path).write_bytes(b"x")
    tm.agent_report(r.triggered[0].pid, "t1", TraceState.DONE)
    doc = json.loads(record.read_bytes())  # one process still tracing
    assert not doc["finished"] and sorted(p["state"] for p in doc["processes"]) == ["done", "pending"]
    _reg2, restarted = manager(traces)
    got = {p.pid: (p.state, p.error) for p in restarted.get("t1").processes}
    assert got[r.triggered[0].pid][0] == TraceState.DONE
    assert got[r.triggered[1].pid] == (TraceState.FAILED, "dynod restarted before the process picked the trace up")
    tm.cancel("t1")
    doc = json.loads(record.read_bytes())
    assert sorted(p["state"] for p in doc["processes"]) == ["cancelled", "done"]
    assert manager(traces)[1].get("t1").finished


def test_recovered_trace_served_under_its_recorded_name_after_a_host_rename(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    reg, tm = manager(traces, "old-name")
    tid, paths = finish(tm, reg, TraceSpec(job_id="J", iterations=2, trace_id="t2"), {9: b"nine"})
    _reg2, tm2 = manager(traces, "new-name")
    assert tm2.trace_file(tid, 9) == paths[9] and paths[9].name == "old-name_9.pt.trace.json.gz"


def test_a_periodic_trace_keeps_its_flag_and_when_each_profiler_started(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    clock = [1_000_000]
    reg = ProcessRegistry(silent_timeout_s=30, is_alive=lambda pid: True, uid_of=_test_user, clock_ms=lambda: clock[0])
    tm = TraceManager(reg, traces, "hostA", kineto_identifier=no_proc_identifier(), clock_ms=lambda: clock[0])
    reg.register(RegisteredProcess(pid=7, job_id="J", protocol=PROTOCOL_AGENT, rank=0, session_id="s7"))
    r = tm.start(TraceSpec(job_id="J", iterations=5, trace_id="periodic-J-1", periodic=True))
    tm.agent_report(7, r.trace_id, TraceState.RUNNING)
    clock[0] += 2_500
    Path(r.triggered[0].path).write_bytes(b"trace")
    tm.agent_report(7, r.trace_id, TraceState.DONE)
    before = tm.get(r.trace_id)
    assert before.processes[0].running_ms == 1_000_000

    after = tj.load_record(traces, r.trace_id)
    assert after == before and after.spec.periodic
    assert after.processes[0].running_ms == 1_000_000 and after.processes[0].updated_ms == 1_002_500


def test_a_record_from_before_the_periodic_flag_and_running_time_still_loads(tmp_path: Path) -> None:
    record, doc = _recorded(tmp_path)
    assert doc["request"]["periodic"] is False and "running_ms" in doc["processes"][0]
    del doc["request"]["periodic"], doc["processes"][0]["running_ms"]
    record.write_bytes(json.dumps(doc).encode())
    view = tj.load_record(record.parent.parent, "t3")
    assert view is not None and view.finished and view.processes[0].state == TraceState.DONE
    assert not view.spec.periodic and view.processes[0].running_ms == 0


def _recorded(tmp_path: Path) -> tuple[Path, dict]:  # type: ignore[type-arg]
    traces = tmp_path / "traces"
    reg, tm = manager(traces)
    finish(tm, reg, TraceSpec(job_id="J", duration_ms=100, trace_id="t3"), {7: b"data"})
    record = traces / "t3" / tj.RECORD_NAME
    return record, json.loads(record.read_bytes())


def _bad(doc: dict, **changes: object) -> bytes:  # type: ignore[type-arg]
    doc = json.loads(json.dumps(doc))
    for key, value in changes.items():
        if key.startswith("p_"):
            doc["processes"][0][key[2:]] = value
        elif key.startswith("r_"):
            doc["request"][key[2:]] = value
        else:
            doc[key] = value
    return json.dumps(doc).encode()


BAD_RECORDS = {
    "not json": lambda d: b"{not json",
    "truncated": lambda d: json.dumps(d).encode()[:-20],
    "a list": lambda d: b"[1, 2]",
    "deeply nested": lambda d: b"[" * 100_000 + b"]" * 100_000,
    "other format": lambda d: _bad(d, format="something-else"),
    "future version": lambda d: _bad(d, version=2),
    "other trace id": lambda d: _bad(d, trace_id="t4"),
    "no processes": lambda d: _bad(d, processes=[]),
    "processes not a list": lambda d: _bad(d, processes={"7": 1}),
    "duplicate pid": lambda d: _bad(d, processes=d["processes"] * 2),
    "path outside the folder": lambda d: _bad(d, p_file="../../../etc/passwd"),
    "absolute path": lambda d: _bad(d, p_file="/etc/passwd"),
    "another pid's file": lambda d: _bad(d, p_file="hostA_8.pt.trace.json.gz"),
    "not a trace file name": lambda d: _bad(d, p_file="hostA_7.bashrc"),
    "state not final": lambda d: _bad(d, p_state="running"),
    "unknown state": lambda d: _bad(d, p_state="exploded"),
    "bool pid": lambda d: _bad(d, p_pid=True),
    "negative size": lambda d: _bad(d, p_size_bytes=-1),
    "huge error": lambda d: _bad(d, p_error="e" * 100_000),
    "unknown protocol": lambda d: _bad(d, p_protocol="ftp"),
    "pids not ints": lambda d: _bad(d, r_pids=["7"]),
    "option not a bool": lambda d: _bad(d, r_with_stack="yes"),
    "duration a string": lambda d: _bad(d, r_duration_ms="100"),
    "periodic not a bool": lambda d: _bad(d, r_periodic="yes"),
    "negative running time": lambda d: _bad(d, p_running_ms=-1),
    "running time a string": lambda d: _bad(d, p_running_ms="5"),
}


@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
def test_bad_record_is_ignored_with_a_warning(tmp_path: Path, case: str, caplog: pytest.LogCaptureFixture) -> None:
    record, doc = _recorded(tmp_path)
    record.write_bytes(BAD_RECORDS[case](doc))
    caplog.set_level(logging.WARNING, logger="dyno.daemon.tracing.journal")
    _reg, tm = manager(record.parent.parent)
    with pytest.raises(UnknownTraceError, match="no record of a finished trace"):
        tm.get("t3")
    assert any(r.levelno == logging.WARNING and "ignoring trace record" in r.getMessage() for r in caplog.records)
    with pytest.raises(UnknownTraceError):  # not half-believed either
        tm.trace_file("t3", 8)


def test_huge_record_is_refused_without_reading_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    record, _doc = _recorded(tmp_path)
    with open(record, "r+b") as f:
        f.truncate(tj.MAX_RECORD_BYTES + 1)  # sparse: costs no disk
    assert tj.load_record(record.parent.parent, "t3") is None
    assert "more than" in caplog.text


def test_symlinked_hard_linked_or_foreign_records_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    record, _doc = _recorded(tmp_path)
    traces = record.parent.parent
    good = tmp_path / "elsewhere.json"
    os.replace(record, good)
    record.symlink_to(good)  # a local user pointing the record at a file of theirs
    assert tj.load_record(traces, "t3") is None and "symlink" in caplog.text
    record.unlink()
    os.link(good, record)
    assert tj.load_record(traces, "t3") is None and "hard link" in caplog.text
    os.unlink(record)
    os.mkfifo(record)  # would block a plain open() forever
    assert tj.load_record(traces, "t3") is None and "special file" in caplog.text
    os.replace(good, record)
    assert tj.load_record(traces, "t3") is not None  # the same bytes, a plain file of ours: believed
    os.replace(traces / "t3", tmp_path / "real")
    (traces / "t3").symlink_to(tmp_path / "real")  # the trace folder itself a symlink
    assert tj.load_record(traces, "t3") is None and "not a directory" in caplog.text
    (traces / "t3").unlink()
    os.replace(tmp_path / "real", traces / "t3")
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)  # a file planted by another user
    assert tj.load_record(traces, "t3") is None and "not by the daemon's uid" in caplog.text


def test_trace_file_changed_since_the_record_is_reported_failed(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    reg, tm = manager(traces)
    tid, paths = finish(tm, reg, TraceSpec(job_id="J", duration_ms=100, trace_id="t5"), {7: b"a", 8: b"b", 9: b"c"})
    paths[7].unlink()
    paths[8].write_bytes(b"bigger")
    paths[9].unlink()
    paths[9].symlink_to("/etc/passwd")  # planted in the world-writable folder after the trace
    _reg2, tm2 = manager(traces)
    states = {p.pid: p for p in tm2.get(tid).processes}
    assert states[7].state == TraceState.FAILED and "is gone" in states[7].error
    assert states[8].state == TraceState.FAILED and "changed size (1 -> 6 bytes)" in states[8].error
    assert states[9].state == TraceState.FAILED and "no longer a plain file" in states[9].error
    for pid in (7, 8, 9):
        with pytest.raises(UnknownTraceError):
            tm2.trace_file(tid, pid)


def test_record_of_a_bad_trace_id_is_never_looked_up(tmp_path: Path) -> None:
    _reg, tm = manager(tmp_path / "traces")
    (tmp_path / "dynod-record.json").write_text("{}")
    for tid in ("..", "../x", "a/b", ""):
        assert tj.load_record(tmp_path / "traces", tid) is None
        with pytest.raises(UnknownTraceError):
            tm.get(tid)


def test_record_write_failure_only_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    traces = tmp_path / "traces"
    reg, tm = manager(traces)
    reg.register(RegisteredProcess(pid=7, job_id="J", protocol=PROTOCOL_AGENT, session_id="s7"))
    tm.start(TraceSpec(job_id="J", duration_ms=100, trace_id="t6"))
    for p in (traces / "t6").iterdir():
        p.unlink()
    (traces / "t6").rmdir()  # e.g. retention by size removed the folder at the same moment
    assert tm.cancel("t6").finished
    assert "cannot write its record" in caplog.text


def test_memory_holds_at_most_max_kept_and_evicted_traces_come_back(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    reg, tm = manager(traces)
    for i in range(4):
        finish(tm, reg, TraceSpec(job_id="J", duration_ms=100, trace_id=f"k{i}"), {7: b"x" * (i + 1)})
    _reg2, tm2 = manager(traces, limits=TraceLimits(max_kept_traces=2))
    for i in range(4):
        assert tm2.get(f"k{i}").processes[0].size_bytes == i + 1
    assert len(tm2.table.traces) == 2  # the oldest recovered ones were dropped from memory...
    assert tm2.trace_file("k0", 7).read_bytes() == b"x"  # ...and come back from their record when named again


def test_retention_deletes_the_record_and_the_manager_forgets(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    reg, tm = manager(traces)
    tid, _paths = finish(tm, reg, TraceSpec(job_id="J", duration_ms=100, trace_id="old"), {7: b"x"})
    _reg2, tm2 = manager(traces)
    assert tm2.get(tid).finished
    result = retention.enforce_retention(
        traces, max_bytes=1 << 30, max_age_s=10, now_s=os.path.getmtime(traces / tid) + 11
    )
    assert result.removed == (tid,) and not (traces / tid).exists()
    tm2.forget(result.removed)
    with pytest.raises(UnknownTraceError) as e:
        tm2.get(tid)
    assert str(e.value) == f"no trace {tid!r} on host hostA"


def test_tracing_retention_pass_forgets_removed_traces(tmp_path: Path) -> None:
    config = DaemonConfig(
        trace_dir=tmp_path / "traces",
        agent_socket=tmp_path / "agent.sock",
        kineto_endpoint="off",
        trace_retention_bytes=0,  # every inactive trace folder but the newest goes at the next pass
    )
    tracing = Tracing(config, "hostA")
    tracing.registry.register(RegisteredProcess(pid=7, job_id="J", protocol=PROTOCOL_AGENT, session_id="s7"))
    tid, _paths = finish(tracing.manager, tracing.registry, TraceSpec(job_id="J", duration_ms=100), {7: b"x"})
    old = os.path.getmtime(config.trace_dir / tid) - 60
    os.utime(config.trace_dir / tid, (old, old))
    newest, _ = finish(tracing.manager, tracing.registry, TraceSpec(job_id="J", duration_ms=100), {7: b"y"})
    assert tracing.manager.get(tid).finished
    tracing._retention()
    assert not (config.trace_dir / tid).exists()
    with pytest.raises(UnknownTraceError):
        tracing.manager.get(tid)
    assert tracing.manager.get(newest).finished  # kept for a later fetch (retention.enforce_retention)


def test_kineto_trace_recovered(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    _reg, tm = manager(traces)
    tm.kineto_poll(KinetoPoll(pid=300, ancestry=(), job_id="7", type_mask=3))
    tm.start(TraceSpec(job_id="7", duration_ms=500, trace_id="kt"))
    tm.kineto_poll(KinetoPoll(pid=300, ancestry=(), job_id="7", type_mask=3))  # delivered
    (traces / "kt" / "hostA_300.pt.trace.json").write_text('{"traceEvents": []}')
    tm.housekeeping()  # libkineto's file is complete: done, and the record is written in the same pass
    _reg2, tm2 = manager(traces)
    (p,) = tm2.get("kt").processes
    assert p.state == TraceState.DONE and p.protocol == "kineto" and p.size_bytes == len('{"traceEvents": []}')
    assert tm2.trace_file("kt", 300).name == "hostA_300.pt.trace.json"


def test_a_bad_record_is_warned_about_once_not_at_every_poll(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    record, _doc = _recorded(tmp_path)
    record.write_bytes(b"garbage")
    _reg, tm = manager(record.parent.parent)
    caplog.set_level(logging.DEBUG, logger="dyno.daemon.tracing.journal")
    for _ in range(5):
        with pytest.raises(UnknownTraceError):
            tm.get("t3")
    levels = [r.levelno for r in caplog.records if "ignoring trace record" in r.getMessage()]
    assert levels == [logging.WARNING] + [logging.DEBUG] * 4

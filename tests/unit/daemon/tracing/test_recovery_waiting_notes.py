"""A process cancelled at `dyno-cli trace --timeout-s` while waiting for optimizer steps: dynod keeps its waiting note
in the trace's record, a restarted dynod answers with it, and a later `dyno-cli fetch` says what the process waited
for, beside dynod's "cancelled by request". Real TraceManager before and after the "restart" (a new one on the same
trace dir), its answer served by a fake daemon through the real proto conversion, real `dyno-cli fetch`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fake_proc import no_proc_identifier
from manual_clock import Clock

from dyno.client.cli import main as cli_main
from dyno.client.cluster_trace import _with_waiting
from dyno.daemon import proto_convert as pc
from dyno.daemon.fake_server import FakeDynoServicer, serve
from dyno.daemon.registry import PROTOCOL_AGENT, ProcessRecord, ProcessRegistry
from dyno.daemon.tracing import journal as tj
from dyno.daemon.tracing.agent_side import RESUMED_TIMEOUT
from dyno.daemon.tracing.kineto_progress import KinetoProgress
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import TraceSpec, TraceState

pytestmark = pytest.mark.unit

NOTE = "no optimizer step for 312 s (the longest pause between two of its 25 steps so far: 0.1 s): stopped?"


def _manager(trace_dir: Path) -> TraceManager:
    reg = ProcessRegistry(is_alive=lambda pid: True, uid_of=lambda pid: os.getuid())
    reg.register(ProcessRecord(pid=101, job_id="J", protocol=PROTOCOL_AGENT, session_id="s1"))
    return TraceManager(reg, trace_dir, "hostW", kineto_identifier=no_proc_identifier())


class _Restarted(FakeDynoServicer):
    """The restarted daemon: GetTrace answers what its TraceManager recovered from the trace's record."""

    def __init__(self, hostname: str, tm: TraceManager) -> None:
        super().__init__(hostname)
        self.tm = tm

    def GetTrace(self, request, context):  # noqa: N802 - grpc method name
        return pc.trace_view_to_pb(self.tm.get(request.trace_id), self.hostname)


def test_a_later_fetch_says_what_a_cancelled_process_waited_for(tmp_path: Path, capsys) -> None:
    trace_dir = tmp_path / "traces"
    before = _manager(trace_dir)
    trace_id = before.start(TraceSpec(job_id="J", iterations=3)).trace_id
    before.agent_delivered(101, trace_id)
    before.agent_report(101, trace_id, TraceState.DELIVERED, NOTE)
    before.cancel(trace_id)  # dyno-cli trace's --timeout-s

    after = _manager(trace_dir)  # dynod restarted: the trace is known from its record
    fake = serve(lambda _port: _Restarted("hostW", after))
    try:
        code = cli_main(
            ["fetch", "--host", fake.target, "--trace-id", trace_id, "--output-dir", str(tmp_path / "out")]
            + ["--no-analyze", "--json"]
        )
    finally:
        fake.server.stop(0)
    (p,) = json.loads(capsys.readouterr().out)["processes"]
    assert code == 1 and p["state"] == "cancelled" and p["waiting"] == NOTE
    assert p["error"] == f"cancelled by request (it was waiting: {NOTE})", p["error"]


def test_a_resumed_process_that_never_reported_again_times_out_saying_so(tmp_path: Path) -> None:
    """Recorded before the restart with a waiting note, it never reported to the restarted daemon (it exited while
    dynod was down): the timeout said only the old note, as if the process were still there and waiting, and not
    that it never came back (RESUMED_TIMEOUT)."""
    trace_dir, clock = tmp_path / "traces", Clock()

    def manager() -> TraceManager:
        reg = ProcessRegistry(is_alive=lambda pid: True, uid_of=lambda pid: os.getuid(), clock_ms=clock)
        for pid in (101, 102):
            reg.register(ProcessRecord(pid=pid, job_id="J", protocol=PROTOCOL_AGENT, session_id=f"s{pid}"))
        return TraceManager(reg, trace_dir, "hostW", clock_ms=clock, kineto_identifier=no_proc_identifier())

    before = manager()
    result = before.start(TraceSpec(job_id="J", iterations=3))
    for p in result.triggered:
        before.agent_delivered(p.pid, result.trace_id)
    before.agent_report(102, result.trace_id, TraceState.DELIVERED, NOTE)
    Path(result.triggered[0].path).write_bytes(b"\x1f\x8b" + bytes(10))
    before.agent_report(101, result.trace_id, TraceState.DONE)  # the record is written: 102 delivered, its note

    after = manager()
    after.get(result.trace_id)  # recovered, 102 resumed
    clock.ms += 3600_000  # past every deadline; 102 never reported to this daemon
    after.housekeeping()
    p = next(p for p in after.get(result.trace_id).processes if p.pid == 102)
    assert p.state == TraceState.TIMED_OUT
    assert RESUMED_TIMEOUT in p.error and NOTE in p.error, p.error


def test_a_resumed_process_that_reports_again_times_out_with_its_new_note(tmp_path: Path) -> None:
    trace_dir, clock = tmp_path / "traces", Clock()
    reg = ProcessRegistry(is_alive=lambda pid: True, uid_of=lambda pid: os.getuid(), clock_ms=clock)
    for pid in (101, 102):
        reg.register(ProcessRecord(pid=pid, job_id="J", protocol=PROTOCOL_AGENT, session_id=f"s{pid}"))
    before = TraceManager(reg, trace_dir, "hostW", clock_ms=clock, kineto_identifier=no_proc_identifier())
    result = before.start(TraceSpec(job_id="J", iterations=3))
    for p in result.triggered:
        before.agent_delivered(p.pid, result.trace_id)
    Path(result.triggered[0].path).write_bytes(b"\x1f\x8b" + bytes(10))
    before.agent_report(101, result.trace_id, TraceState.DONE)

    after = TraceManager(reg, trace_dir, "hostW", clock_ms=clock, kineto_identifier=no_proc_identifier())
    after.agent_report(102, result.trace_id, TraceState.DELIVERED, NOTE)  # the agent, registered again, still waits
    clock.ms += 3600_000
    after.housekeeping()
    p = next(p for p in after.get(result.trace_id).processes if p.pid == 102)
    assert p.state == TraceState.TIMED_OUT and p.error == f"no complete trace file by the deadline: {NOTE}"


def test_reasons_that_say_what_it_waited_for_are_not_given_the_note_again() -> None:
    """A libkineto process's timeout (and exit) reason tells its progress in words of its own: the waiting note added
    to it doubled the line (1083 characters for 607)."""
    spec = TraceSpec(job_id="J", iterations=3)
    note = KinetoProgress(spec, TraceState.DELIVERED, 1000, 0, 600_000, 599_000).waiting_note()
    reason = KinetoProgress(spec, TraceState.DELIVERED, 1000, 0, 601_000, 600_000).deadline_reason()
    assert _with_waiting(reason, note, "timed_out") == reason
    assert _with_waiting("cancelled by request", NOTE, "cancelled") == f"cancelled by request (it was waiting: {NOTE})"


def test_a_record_of_the_version_before_partial_records_still_loads(tmp_path: Path) -> None:
    """Written before `finished`, `waiting` and `uid` were recorded: a finished trace, no notes, users unknown."""
    trace_dir = tmp_path / "traces"
    tm = _manager(trace_dir)
    trace_id = tm.start(TraceSpec(job_id="J", iterations=3)).trace_id
    tm.agent_delivered(101, trace_id)
    tm.agent_report(101, trace_id, TraceState.DELIVERED, NOTE)
    tm.cancel(trace_id)
    path = trace_dir / trace_id / tj.RECORD_NAME
    doc = json.loads(path.read_text())
    del doc["finished"]
    for p in doc["processes"]:
        del p["waiting"], p["uid"]
    path.write_text(json.dumps(doc))
    view = tj.load_record(trace_dir, trace_id)
    assert view is not None and view.finished
    (p,) = view.processes
    assert p.state == TraceState.CANCELLED and p.waiting == "" and p.uid == -1

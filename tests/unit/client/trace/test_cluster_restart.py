"""ClusterTrace._follow_host after a dynod restart mid-trace: it waits for the processes that can still report to the
restarted daemon, and no longer than that; waiting notes survive the restart."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
from fake_proc import no_proc_identifier
from manual_clock import Clock

from dyno.client.cli import main as cli_main
from dyno.client.cluster import Cluster
from dyno.client.errors import NotFound, Unavailable
from dyno.client.hosts import Host
from dyno.client.trace.answers import with_waiting as _with_waiting
from dyno.client.trace.cluster import ClusterTrace
from dyno.client.trace.records import ProcRecord
from dyno.daemon import proto_convert as pc
from dyno.daemon.fake_server import FakeDynoServicer, serve
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing import journal as tj
from dyno.daemon.tracing.agent_side import RESUMED_TIMEOUT
from dyno.daemon.tracing.kineto_progress import KinetoProgress
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import TraceSpec, TraceState
from dyno.error_reasons import ErrorReason
from dyno.v1 import dyno_pb2

from conftest import free_port

pytestmark = pytest.mark.unit

_RESTARTED = "no trace 't-r' (its folder exists ...: the trace was still running when this daemon restarted)"


class _RestartedDaemon:
    """A daemon that restarted mid-trace and never hears of the trace again."""

    def __init__(self) -> None:
        self.calls = 0

    def get_trace(self, trace_id: str) -> dyno_pb2.TraceStatus:
        self.calls += 1
        raise NotFound(_RESTARTED, reason=ErrorReason.TRACE_FORGOTTEN.value)


def _follow(tmp_path: Path, *procs: ProcRecord) -> tuple[ClusterTrace, threading.Thread]:
    cluster = Cluster([Host("127.0.0.1", free_port())], deadline_s=1)
    request = dyno_pb2.TraceRequest(job_id="j", trace_id="t-r", duration_ms=100)
    ct = ClusterTrace(cluster, request, tmp_path, wait_s=120, unreachable_s=0.2, poll_s=0.02)
    daemon = _RestartedDaemon()
    ct.cluster.client = lambda _host: daemon  # type: ignore[method-assign]
    ct.started_monotonic = time.monotonic()
    h = ct.hosts[0]
    h.processes = list(procs)
    t = threading.Thread(target=ct._follow_host, args=(h,), daemon=True)
    t.start()
    return ct, t


def _ended(ct: ClusterTrace, t: threading.Thread) -> bool:
    t.join(15)  # far below wait_s (120 s): the follow must end on its own, not at --timeout-s
    ended = not t.is_alive()
    ct._stop.set()
    t.join(5)
    ct.cluster.close()
    return ended


def test_kineto_only_host_is_not_waited_for_after_a_restart(tmp_path: Path) -> None:
    """A restarted daemon takes on only agent processes' reports: a host whose unfinished processes are all
    libkineto ones fails with the restart reason at once instead of waiting out --timeout-s."""
    ct, t = _follow(tmp_path, ProcRecord(pid=11, rank=0, protocol="kineto", state="running"))
    assert _ended(ct, t)
    (h,) = ct.snapshot()
    assert h.state == "failed" and "restarted" in h.error


def test_pending_agent_is_not_waited_for_after_a_restart(tmp_path: Path) -> None:
    """An agent that had not picked the request up (pending) never records it: nothing can arrive."""
    ct, t = _follow(tmp_path, ProcRecord(pid=12, rank=0, protocol="agent", state="pending"))
    assert _ended(ct, t)
    assert ct.snapshot()[0].state == "failed"


def test_recording_agent_is_waited_for_after_a_restart(tmp_path: Path) -> None:
    """An agent process that was recording goes on and reports to the restarted daemon: worth waiting for."""
    ct, t = _follow(tmp_path, ProcRecord(pid=13, rank=0, protocol="agent", state="running"))
    t.join(0.5)
    assert t.is_alive()  # still waiting (until --timeout-s or a report)
    ct._stop.set()
    t.join(5)
    ct.cluster.close()
    assert not t.is_alive()


class _BrokenHistory:
    """A history whose append raises (a bug below tick(), not a hung driver call)."""

    def append(self, sample: object) -> None:
        raise RuntimeError("broken history")


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the loop thread's end
def test_prime_returns_at_once_when_the_first_tick_raises() -> None:
    """dynod's start-up waits in prime() for the first sample: a first tick that raised (not one that hangs) must
    not hold start-up for the whole stall limit and then be reported as a hung driver call."""
    from dyno.daemon.loop import SamplingLoop

    loop = SamplingLoop([], _BrokenHistory(), 1.0, stall_s=60.0)  # type: ignore[arg-type]
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(loop.prime()), daemon=True)
    t.start()
    t.join(15)  # far below the stall limit
    loop.stop(timeout=5)
    assert result == [False]


class _RestartingDaemon:
    """Down (UNAVAILABLE), then back and answering 'restarted' for a while, one more blip, then the trace's end."""

    def __init__(self) -> None:
        self.calls = 0

    def get_trace(self, trace_id: str) -> dyno_pb2.TraceStatus:
        self.calls += 1
        if self.calls == 1 or self.calls == 40:
            raise Unavailable("connection refused")
        if self.calls < 40:
            raise NotFound(_RESTARTED, reason=ErrorReason.TRACE_FORGOTTEN.value)
        failed = dyno_pb2.ProcessTrace(pid=13, rank=0, state=dyno_pb2.TRACE_STATE_FAILED, error="x")
        return dyno_pb2.TraceStatus(trace_id=trace_id, processes=[failed], finished=True)


def test_a_blip_after_a_restart_answer_does_not_fail_the_host(tmp_path: Path) -> None:
    """The unreachable clock starts at the restart's UNAVAILABLE; the daemon's 'restarted' answers show it is up, so
    one UNAVAILABLE much later is a new blip, not unreachable_s of failures."""
    cluster = Cluster([Host("127.0.0.1", free_port())], deadline_s=1)
    request = dyno_pb2.TraceRequest(job_id="j", trace_id="t-r", duration_ms=100)
    ct = ClusterTrace(cluster, request, tmp_path, wait_s=120, unreachable_s=0.2, poll_s=0.02)
    ct.cluster.client = lambda _host: _RestartingDaemon()  # type: ignore[method-assign]
    ct.started_monotonic = time.monotonic()
    h = ct.hosts[0]
    h.processes = [ProcRecord(pid=13, rank=0, protocol="agent", state="running")]
    ct._follow_host(h)
    cluster.close()
    (h,) = ct.snapshot()
    assert h.state == "done", h.error
    assert h.processes[0].state == "failed"


# A process cancelled at --timeout-s while waiting keeps its waiting note across a dynod restart, and a later fetch
# says what it waited for.


NOTE = "no optimizer step for 312 s (the longest pause between two of its 25 steps so far: 0.1 s): stopped?"


def _manager(trace_dir: Path) -> TraceManager:
    reg = ProcessRegistry(is_alive=lambda pid: True, uid_of=lambda pid: os.getuid())
    reg.register(RegisteredProcess(pid=101, job_id="J", protocol=PROTOCOL_AGENT, session_id="s1"))
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
            reg.register(RegisteredProcess(pid=pid, job_id="J", protocol=PROTOCOL_AGENT, session_id=f"s{pid}"))
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
        reg.register(RegisteredProcess(pid=pid, job_id="J", protocol=PROTOCOL_AGENT, session_id=f"s{pid}"))
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

"""Process registry, request matching, per-process state machine, timeouts, files and retention."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_proc import no_proc, no_proc_identifier
from manual_clock import Clock

from dyno.daemon.registered_process import PROTOCOL_AGENT, PROTOCOL_KINETO, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing.kineto_identity import KinetoIdentifier
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.manager import TraceManager, order_for_limit
from dyno.daemon.tracing.table import TraceLimits
from dyno.daemon.tracing.values import (
    AgentCancelCommand,
    AgentTraceCommand,
    TraceLimitError,
    TraceRequestError,
    TraceSpec,
    TraceState,
    UnknownTraceError,
)

pytestmark = pytest.mark.unit


def _test_user(pid: int) -> int:
    # the fake pids' trainer is this test, which writes their files: a fake pid that is a real process (a kernel
    # thread, owned by root) must not make the daemon's ownership check refuse them when the tests run as non-root
    return os.getuid()


@pytest.fixture
def env(tmp_path: Path):  # type: ignore[no-untyped-def]
    clock = Clock()
    alive: set[int] = set()
    reg = ProcessRegistry(silent_timeout_s=30, is_alive=lambda pid: pid in alive, clock_ms=clock, uid_of=_test_user)
    tm = TraceManager(
        reg,
        tmp_path / "traces",
        "hostA",
        limits=TraceLimits(delivery_timeout_s=10, completion_slack_s=5, iteration_timeout_s=60, max_active_traces=3),
        clock_ms=clock,
        kineto_identifier=no_proc_identifier(),  # the fake pids may be real processes here
    )
    return clock, alive, reg, tm


def agent(pid: int, job: str = "J", ancestry: tuple[int, ...] = (), rank: int | None = None) -> RegisteredProcess:
    return RegisteredProcess(
        pid=pid, job_id=job, protocol=PROTOCOL_AGENT, ancestry=ancestry, rank=rank, session_id=f"s{pid}"
    )


def kpoll(pid: int, job: str = "7", mask: int = 3, ancestry: tuple[int, ...] = ()) -> KinetoPoll:
    return KinetoPoll(pid=pid, ancestry=ancestry, job_id=job, type_mask=mask)


# -- registry ---------------------------------------------------------------------------------------------------


def test_registry_drops_dead_and_silent_and_tells_listeners(env) -> None:  # type: ignore[no-untyped-def]
    clock, alive, reg, _tm = env
    removed: list[tuple[int, str]] = []
    reg.add_removal_listener(lambda rec, why: removed.append((rec.pid, why)))
    alive.update({10, 11, 12})
    reg.register(agent(10))
    reg.register(agent(11))
    reg.set_connected(11, "s11", True)
    reg.register(RegisteredProcess(pid=12, job_id="7", protocol=PROTOCOL_KINETO))
    alive.discard(10)
    clock.ms += 31_000
    dropped = {rec.pid: why for rec, why in reg.collect_garbage()}
    assert dropped[10] == "process exited"
    assert "stopped polling" in dropped[12]
    assert 11 not in dropped  # an open Watch stream is liveness enough
    assert [p.pid for p in reg.list()] == [11]
    assert sorted(removed) == sorted(dropped.items())


def test_registry_keeps_registration_time_and_filters_job(env) -> None:  # type: ignore[no-untyped-def]
    clock, _alive, reg, _tm = env
    first = reg.register(agent(5, job="A", ancestry=(1, 4)))
    assert first.ancestry == (4,)  # pid 1 is never an interesting ancestor
    clock.ms += 1000
    again = reg.register(agent(5, job="A"))
    assert again.registered_ms == first.registered_ms and again.last_seen_ms == clock.ms
    reg.register(agent(6, job="B"))
    assert [p.pid for p in reg.list("B")] == [6]
    assert reg.jobs() == ["A", "B"]


def test_kineto_polls_do_not_replace_a_connected_agent_of_the_same_process(env) -> None:  # type: ignore[no-untyped-def]
    # dyno-run in an environment with KINETO_USE_DAEMON=1: one process speaks both protocols. The agent was
    # replaced by a kineto record at libkineto's next poll, its Watch stream orphaned and its options lost.
    clock, alive, reg, tm = env
    alive.add(300)
    reg.register(agent(300))
    assert reg.set_connected(300, "s300", True)
    clock.ms += 5000
    reads: list[int] = []
    tm._identifier = KinetoIdentifier(lambda pid, name, limit: reads.append(pid) or no_proc(pid, name, limit))
    assert tm.kineto_poll(kpoll(300)) is None
    assert reads == [], "a poll of a process the agent holds must not read its /proc every 5 s"
    rec = reg.get(300)
    assert (rec.protocol, rec.session_id, rec.last_seen_ms) == (PROTOCOL_AGENT, "s300", clock.ms)
    started = tm.start(TraceSpec(job_id="J", iterations=2, with_flops=True))
    assert [p.protocol for p in started.triggered] == [PROTOCOL_AGENT]
    assert tm.kineto_poll(kpoll(300)) is None  # the trace goes to the agent, never as a kineto config
    # Once the agent's stream is gone, libkineto may take the process over (still traceable).
    tm.cancel(started.trace_id)
    reg.set_connected(300, "s300", False)
    tm.kineto_poll(kpoll(300))
    assert reg.get(300).protocol == PROTOCOL_KINETO


def test_stale_session_cannot_remove_a_reregistered_process(env) -> None:  # type: ignore[no-untyped-def]
    _clock, _alive, reg, _tm = env
    reg.register(agent(5))
    reg.register(RegisteredProcess(pid=5, job_id="J", protocol=PROTOCOL_AGENT, session_id="new"))
    assert reg.remove(5, "gone", session_id="s5") is None
    assert reg.get(5) is not None


# -- matching ---------------------------------------------------------------------------------------------------


def test_validation_names_the_field(env) -> None:  # type: ignore[no-untyped-def]
    clock, _alive, _reg, tm = env
    cases = {
        "job_id": TraceSpec(job_id=" ", duration_ms=5),
        "duration_ms": TraceSpec(job_id="J"),
        "iterations": TraceSpec(job_id="J", iterations=0),
        "process_limit": TraceSpec(job_id="J", duration_ms=5, process_limit=-1),
        "trace_id": TraceSpec(job_id="J", duration_ms=5, trace_id="../x"),
        "start_time_ms": TraceSpec(job_id="J", duration_ms=5, start_time_ms=clock.ms - 60_000),
        "start_iteration_roundup": TraceSpec(job_id="J", duration_ms=5, start_iteration_roundup=2),
        "pids": TraceSpec(job_id="J", duration_ms=5, pids=(0,)),
    }
    for field_name, spec in cases.items():
        with pytest.raises(TraceRequestError) as err:
            tm.validate(spec)
        assert err.value.field == field_name
    with pytest.raises(TraceRequestError):
        tm.validate(TraceSpec(job_id="J", duration_ms=5, trace_id=".."))
    with pytest.raises(TraceRequestError, match=r"within 10 s in the past \.\. 3600 s in the future"):
        tm.validate(TraceSpec(job_id="J", duration_ms=5, start_time_ms=clock.ms + 3_600_001))  # from request_limits


def test_nothing_matched_says_why(env) -> None:  # type: ignore[no-untyped-def]
    _clock, _alive, reg, tm = env
    r = tm.start(TraceSpec(job_id="nope", duration_ms=100))
    assert r.triggered == () and "no processes are registered at all" in r.message
    reg.register(agent(5, job="36199_0"))
    r = tm.start(TraceSpec(job_id="nope", duration_ms=100))
    assert "no process of job 'nope'" in r.message and "'36199_0'" in r.message
    assert r.registered_jobs == ("36199_0",)
    r = tm.start(TraceSpec(job_id="36199_0", duration_ms=100, pids=(999,)))
    assert "none with pid(s) 999" in r.message


def test_process_limit_prefers_leaf_workers(env) -> None:  # type: ignore[no-untyped-def]
    _clock, _alive, reg, tm = env
    reg.register(agent(100, ancestry=(50,)))  # launcher
    reg.register(agent(101, ancestry=(100, 50), rank=1))
    reg.register(agent(102, ancestry=(100, 50), rank=0))
    assert [p.pid for p in order_for_limit(reg.list())] == [102, 101, 100]
    r = tm.start(TraceSpec(job_id="J", duration_ms=100, process_limit=1))
    assert set(r.matched_pids) == {100, 101, 102}
    assert [v.pid for v in r.triggered] == [102]
    assert r.triggered[0].path.endswith(f"/{r.trace_id}/hostA_102.pt.trace.json.gz")


def test_pids_match_ancestry(env) -> None:  # type: ignore[no-untyped-def]
    _clock, _alive, reg, tm = env
    reg.register(agent(100, ancestry=(50,)))
    reg.register(agent(200, ancestry=(60,)))
    r = tm.start(TraceSpec(job_id="J", duration_ms=100, pids=(50,)))
    assert [v.pid for v in r.triggered] == [100]


def test_busy_processes_reported_and_limits(env) -> None:  # type: ignore[no-untyped-def]
    _clock, _alive, reg, tm = env
    reg.register(agent(1000))
    first = tm.start(TraceSpec(job_id="J", duration_ms=100))
    assert reg.get(1000).busy and reg.get(1000).current_trace_id == first.trace_id
    second = tm.start(TraceSpec(job_id="J", duration_ms=100))
    assert (
        second.triggered == ()
        and second.busy_pids == (1000,)
        and second.message == f"every matched process is already tracing (trace {first.trace_id})"
    )
    with pytest.raises(TraceRequestError):
        tm.start(TraceSpec(job_id="J", duration_ms=100, trace_id=first.trace_id))
    for pid in (1001, 1002):
        reg.register(agent(pid, job=str(pid)))
        tm.start(TraceSpec(job_id=str(pid), duration_ms=100))
    reg.register(agent(1003, job="x"))
    with pytest.raises(TraceLimitError):
        tm.start(TraceSpec(job_id="x", duration_ms=100))


def test_partly_busy_job_names_the_trace_that_holds_the_others(env) -> None:  # type: ignore[no-untyped-def]
    _clock, _alive, reg, tm = env
    reg.register(agent(1000))
    first = tm.start(TraceSpec(job_id="J", duration_ms=100))
    reg.register(agent(1001))
    second = tm.start(TraceSpec(job_id="J", duration_ms=100))
    assert [v.pid for v in second.triggered] == [1001] and second.busy_pids == (1000,)
    assert second.message == f"triggered 1 of 2 matched process(es); 1 busy with another trace ({first.trace_id})"


# -- agent lifecycle --------------------------------------------------------------------------------------------


def test_agent_lifecycle_done(env) -> None:  # type: ignore[no-untyped-def]
    _clock, _alive, reg, tm = env
    reg.register(agent(7))
    q = tm.agent_attach(7, "s7")
    r = tm.start(TraceSpec(job_id="J", iterations=2, record_shapes=True, trace_id="my.trace-1"))
    cmd = q.get_nowait()
    assert isinstance(cmd, AgentTraceCommand) and cmd.trace_id == "my.trace-1" and cmd.spec.iterations == 2
    assert str(cmd.output_path) == r.triggered[0].path
    tm.agent_delivered(7, "my.trace-1")
    assert tm.get("my.trace-1").processes[0].state == TraceState.DELIVERED
    tm.agent_report(7, "my.trace-1", TraceState.RUNNING)
    assert tm.get("my.trace-1").processes[0].state == TraceState.RUNNING
    cmd.output_path.write_bytes(b"x" * 10)
    tm.agent_report(7, "my.trace-1", TraceState.DONE)
    view = tm.get("my.trace-1")
    assert view.finished and view.processes[0].state == TraceState.DONE and view.processes[0].size_bytes == 10
    assert not reg.get(7).busy
    assert tm.trace_file("my.trace-1", 7) == cmd.output_path


def test_agent_done_without_file_fails_and_pending_is_sent_on_attach(env) -> None:  # type: ignore[no-untyped-def]
    _clock, _alive, reg, tm = env
    reg.register(agent(7))
    r = tm.start(TraceSpec(job_id="J", duration_ms=50))
    q = tm.agent_attach(7, "s7")  # the stream opened after the request: the config is waiting in it
    assert isinstance(q.get_nowait(), AgentTraceCommand)
    tm.agent_report(7, r.trace_id, TraceState.DONE)
    p = tm.get(r.trace_id).processes[0]
    assert p.state == TraceState.FAILED and "missing" in p.error
    with pytest.raises(UnknownTraceError):
        tm.trace_file(r.trace_id, 7)
    with pytest.raises(UnknownTraceError):
        tm.agent_report(7, "unknown", TraceState.DONE)


def test_process_gone_mid_trace_fails_with_reason(env) -> None:  # type: ignore[no-untyped-def]
    _clock, _alive, reg, tm = env
    reg.register(agent(7))
    tm.agent_attach(7, "s7")
    r = tm.start(TraceSpec(job_id="J", duration_ms=5000))
    tm.agent_delivered(7, r.trace_id)
    reg.remove(7, "process exited or disconnected", session_id="s7")
    p = tm.get(r.trace_id).processes[0]
    assert p.state == TraceState.FAILED and p.error == "process exited or disconnected mid-trace"


def test_cancel(env) -> None:  # type: ignore[no-untyped-def]
    _clock, _alive, reg, tm = env
    reg.register(agent(7))
    q = tm.agent_attach(7, "s7")
    r = tm.start(TraceSpec(job_id="J", duration_ms=5000))
    q.get_nowait()
    view = tm.cancel(r.trace_id)
    assert view.finished and view.processes[0].state == TraceState.CANCELLED
    assert isinstance(q.get_nowait(), AgentCancelCommand)
    with pytest.raises(UnknownTraceError):
        tm.cancel("nope")


def test_timeouts(env) -> None:  # type: ignore[no-untyped-def]
    clock, alive, reg, tm = env
    alive.update({7, 8})
    reg.register(agent(7))
    reg.register(agent(8, job="K"))
    reg.set_connected(7, "s7", True)
    reg.set_connected(8, "s8", True)
    undelivered = tm.start(TraceSpec(job_id="J", duration_ms=1000))
    late = tm.start(TraceSpec(job_id="K", iterations=5))
    tm.agent_delivered(8, late.trace_id)
    clock.ms += 11_000
    tm.housekeeping()
    p = tm.get(undelivered.trace_id).processes[0]
    assert p.state == TraceState.TIMED_OUT and "not picked up within 10 s" in p.error
    assert tm.get(late.trace_id).processes[0].state == TraceState.DELIVERED
    clock.ms += 60_000
    tm.housekeeping()
    p = tm.get(late.trace_id).processes[0]
    assert p.state == TraceState.TIMED_OUT and "optimizer.step()" in p.error


# -- kineto lifecycle -------------------------------------------------------------------------------------------


def test_kineto_lifecycle_via_file(env) -> None:  # type: ignore[no-untyped-def]
    _clock, alive, reg, tm = env
    alive.add(300)
    assert tm.kineto_poll(kpoll(300, ancestry=(299,))) is None
    assert reg.get(300).protocol == PROTOCOL_KINETO and reg.get(300).job_id == "7"
    r = tm.start(TraceSpec(job_id="7", duration_ms=500, trace_id="kt"))
    expected = tm.trace_dir / "kt" / "hostA_300.pt.trace.json"
    assert r.triggered[0].path == str(expected)
    assert tm.kineto_poll(kpoll(300, mask=1)) is None  # no activity bit: keep it pending
    config = tm.kineto_poll(kpoll(300))
    assert config and f"ACTIVITIES_LOG_FILE={tm.trace_dir}/kt/hostA.pt.trace.json" in config.split("\n")
    assert "REQUEST_TRACE_ID=kt" in config.split("\n")
    assert tm.get("kt").processes[0].state == TraceState.DELIVERED
    assert tm.kineto_poll(kpoll(300)) is None  # handed over once
    tm.kineto_poll(kpoll(300, mask=1))
    assert tm.get("kt").processes[0].state == TraceState.RUNNING
    expected.write_text('{"traceEvents": []}')
    tm.housekeeping()
    p = tm.get("kt").processes[0]
    assert p.state == TraceState.DONE and p.size_bytes == expected.stat().st_size


def test_kineto_exit_mid_trace_fails_but_finished_file_wins(env) -> None:  # type: ignore[no-untyped-def]
    _clock, alive, _reg, tm = env
    alive.update({300, 301})
    tm.kineto_poll(kpoll(300))
    tm.kineto_poll(kpoll(301))
    r = tm.start(TraceSpec(job_id="7", duration_ms=500, trace_id="kx"))
    assert len(r.triggered) == 2
    tm.kineto_poll(kpoll(300))
    tm.kineto_poll(kpoll(301))
    (tm.trace_dir / "kx" / "hostA_301.pt.trace.json").write_text("{}")
    alive.clear()
    tm.housekeeping()
    states = {p.pid: p for p in tm.get("kx").processes}
    assert states[300].state == TraceState.FAILED and states[300].error == "process exited before the trace finished"
    assert states[301].state == TraceState.DONE


# -- files ------------------------------------------------------------------------------------------------------


def test_trace_id_with_a_folder_on_disk_is_refused(tmp_path: Path) -> None:
    """A caller-chosen trace id whose folder is in the trace dir (a trace from before a restart, or evicted from
    memory) is refused as "already in use", and the earlier trace's files stay as they were."""
    reg = ProcessRegistry(silent_timeout_s=30, is_alive=lambda pid: True)
    tm = TraceManager(reg, tmp_path / "traces", "hostA")
    reg.register(RegisteredProcess(pid=7, job_id="J", protocol=PROTOCOL_AGENT, session_id="s7"))
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

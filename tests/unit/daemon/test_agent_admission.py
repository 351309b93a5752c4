"""Who may register with the agent socket and report to it (daemon/agent_admission.py), without gRPC."""

from __future__ import annotations

import os

import pytest

from dyno.daemon import agent_admission
from dyno.daemon.agent_admission import Admission, Refusal, RefusalKind, RefusalReason
from dyno.daemon.registered_process import PROTOCOL_AGENT, PROTOCOL_KINETO, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry

pytestmark = pytest.mark.unit

ME = os.getpid()


def _admission(registry: ProcessRegistry, *, checks_owner: bool = False, clock: list[float] | None = None) -> Admission:
    now = clock if clock is not None else [0.0]
    return Admission(registry, checks_owner=checks_owner, monotonic=lambda: now[0], pid_namespace="ns1")


def _register(adm: Admission, pid: int = ME, **kw: object) -> None:
    args: dict[str, object] = dict(
        ancestry=0, job_id="j", text_len=0, hostname_len=0, pid_namespace="", caller_uid=os.getuid()
    )
    args.update(kw)
    adm.check_register(pid, **args)  # type: ignore[arg-type]


def _refusal(fn: object, *args: object, **kw: object) -> Refusal:
    with pytest.raises(Refusal) as e:
        fn(*args, **kw)  # type: ignore[operator]
    return e.value


def test_a_registration_of_a_live_process_of_ones_own_is_admitted() -> None:
    _register(_admission(ProcessRegistry(), checks_owner=True))


def test_malformed_registrations_are_invalid_requests() -> None:
    adm = _admission(ProcessRegistry())
    for pid, kw, text in [
        (0, {}, "pid: required (> 0)"),
        (ME, {"ancestry": agent_admission.MAX_ANCESTRY + 1}, "ancestry: at most"),
        (ME, {"job_id": "a\nb"}, "job_id:"),
        (ME, {"text_len": agent_admission.MAX_TEXT + 1}, "cmdline/hostname: too long"),
    ]:
        r = _refusal(_register, adm, pid, **kw)
        assert r.kind == RefusalKind.INVALID and r.reason == RefusalReason.BAD_REQUEST and text in r.message


def test_a_process_of_another_pid_namespace_or_none_at_all_is_refused() -> None:
    adm = _admission(ProcessRegistry(is_alive=lambda pid: pid == ME))
    other = _refusal(_register, adm, pid_namespace="ns2")
    assert other.kind == RefusalKind.PRECONDITION and other.reason == RefusalReason.OTHER_PID_NAMESPACE
    gone = _refusal(_register, adm, 2**22 + 12345)
    assert gone.kind == RefusalKind.INVALID and gone.reason == RefusalReason.NO_SUCH_PROCESS


def test_only_the_processs_own_user_or_root_registers_it_when_callers_are_known() -> None:
    adm = _admission(ProcessRegistry(), checks_owner=True)
    r = _refusal(_register, adm, caller_uid=os.getuid() + 1)
    assert r.kind == RefusalKind.NOT_PERMITTED and r.reason == RefusalReason.NOT_OWNER
    assert "may register only its own processes" in r.message
    unknown = _refusal(_register, adm, caller_uid=None)
    assert unknown.reason == RefusalReason.NOT_OWNER and "cannot tell which user calls" in unknown.message
    _register(adm, caller_uid=0)  # root may
    _register(_admission(ProcessRegistry()), caller_uid=os.getuid() + 1)  # no per-user rules: anyone may


def test_a_connected_agent_registration_is_not_taken_over() -> None:
    reg = ProcessRegistry()
    reg.register(RegisteredProcess(pid=ME, job_id="j", protocol=PROTOCOL_AGENT, session_id="s"))
    reg.set_connected(ME, "s", True)
    r = _refusal(_register, _admission(reg))
    assert r.kind == RefusalKind.PRECONDITION and r.reason == RefusalReason.ALREADY_REGISTERED


def test_registrations_waiting_for_their_stream_are_bounded_until_the_grace_period(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(agent_admission, "MAX_UNWATCHED", 2)
    clock = [100.0]
    adm = _admission(ProcessRegistry(), clock=clock)
    adm.admit()
    adm.registered("a", 1)
    adm.admit()
    adm.registered("b", 2)
    r = _refusal(adm.admit)
    assert r.kind == RefusalKind.FULL and r.reason == RefusalReason.TOO_MANY_UNWATCHED
    assert r.message.startswith("2 agent registrations are waiting for their Watch stream")
    adm.watched("a")  # its stream opened: room for one more
    adm.admit()
    adm.registered("c", 3)
    clock[0] += agent_admission.UNWATCHED_GRACE_S  # the others waited too long: dropped
    adm.admit()


def test_a_report_must_carry_its_registrations_session() -> None:
    reg = ProcessRegistry()
    adm = _admission(reg)
    assert _refusal(adm.check_report, ME, "s").reason == RefusalReason.NOT_REGISTERED
    reg.register(RegisteredProcess(pid=ME, job_id="j", protocol=PROTOCOL_KINETO))
    assert _refusal(adm.check_report, ME, "s").reason == RefusalReason.NOT_REGISTERED  # libkineto never reports
    reg.register(
        RegisteredProcess(pid=ME, job_id="j", protocol=PROTOCOL_AGENT, session_id="s", reports_with_session=True)
    )
    adm.check_report(ME, "s")
    wrong = _refusal(adm.check_report, ME, "t")
    assert wrong.kind == RefusalKind.NOT_PERMITTED and wrong.reason == RefusalReason.WRONG_SESSION
    assert _refusal(adm.check_report, ME, "").reason == RefusalReason.WRONG_SESSION  # it said it sends one

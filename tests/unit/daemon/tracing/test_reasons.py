"""Machine-readable reasons: every error status of dynod carries a google.rpc.ErrorInfo (domain "dyno.v1"), the
client branches on it (the message text only for a daemon that sends none), and each process's trace state has a
reason beside its human `error`, kept in the trace's record across a restart."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import grpc
import pytest
from small_daemon import small_daemon

from dyno.client.client import DynoClient
from dyno.client.errors import InvalidArgument, NotFound, Unavailable, translate
from dyno.client.trace.restarts import restarted_text
from dyno.client.trace.start import _in_use, start_trace_retrying
from dyno.daemon.proto_convert import REASON_TO_PB, process_trace_to_pb
from dyno.daemon.registered_process import PROTOCOL_AGENT, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.rpc_abort import abort
from dyno.daemon.tracing import journal as tj
from dyno.daemon.tracing.agent_side import GONE_REASON
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.values import TraceReason, TraceSpec, TraceState
from dyno.error_reasons import DETAILS_KEY, DOMAIN, ErrorReason, details_trailer, reason_of
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def _call_error(call: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as e:
        call()
    return e.value


def test_daemon_errors_carry_their_reason_as_error_info() -> None:
    with small_daemon("dyno-rsn-") as daemon:
        with grpc.insecure_channel(f"127.0.0.1:{daemon.port}") as ch:
            get = ch.unary_unary(
                "/dyno.v1.Dyno/GetTrace",
                request_serializer=dyno_pb2.GetTraceRequest.SerializeToString,
                response_deserializer=dyno_pb2.TraceStatus.FromString,
            )
            missing = _call_error(lambda: get(dyno_pb2.GetTraceRequest(trace_id="nosuchtrace"), timeout=10))
            assert missing.code() == grpc.StatusCode.NOT_FOUND
            assert reason_of(missing.trailing_metadata()) == ErrorReason.TRACE_NOT_FOUND.value
            empty = _call_error(lambda: get(dyno_pb2.GetTraceRequest(), timeout=10))
            assert empty.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert reason_of(empty.trailing_metadata()) == ErrorReason.INVALID_REQUEST.value
            # the detail is a google.rpc.Status of the same code and message, with one ErrorInfo of dyno's domain
            from google.rpc import error_details_pb2, status_pb2

            raw = dict(missing.trailing_metadata())[DETAILS_KEY]
            status = status_pb2.Status.FromString(raw)
            assert status.code == grpc.StatusCode.NOT_FOUND.value[0] and status.message == missing.details()
            info = error_details_pb2.ErrorInfo()
            assert status.details[0].Unpack(info) and info.domain == DOMAIN == "dyno.v1"
        # the client's error says it too
        client = DynoClient(f"127.0.0.1:{daemon.port}")
        try:
            with pytest.raises(NotFound) as nf:
                client.get_trace("nosuchtrace")
            assert nf.value.reason == ErrorReason.TRACE_NOT_FOUND.value
            rec = RegisteredProcess(pid=os.getpid(), job_id="j", protocol=PROTOCOL_AGENT, uid=os.getuid())
            daemon.tracing.registry.register(rec)
            os.makedirs(daemon.config.trace_dir / "taken2", exist_ok=True)  # a folder of that name: the id is used
            with pytest.raises(InvalidArgument) as used:
                client.start_trace(dyno_pb2.TraceRequest(job_id="j", duration_ms=500, trace_id="taken2"))
            assert used.value.reason == ErrorReason.TRACE_ID_IN_USE.value
            assert "already in use" in used.value.message  # the message stays as helpful
        finally:
            client.close()


class _Ctx:
    def __init__(self) -> None:
        self.trailer: tuple[tuple[str, Any], ...] = ()

    def set_trailing_metadata(self, md: tuple[tuple[str, Any], ...]) -> None:
        self.trailer = md

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise RuntimeError(details)


def test_abort_keeps_other_trailing_metadata_beside_the_reason() -> None:
    ctx = _Ctx()
    with pytest.raises(RuntimeError):
        abort(ctx, grpc.StatusCode.RESOURCE_EXHAUSTED, "full", metadata=(("retry-after-ms", "200"),))
    assert dict(ctx.trailer)["retry-after-ms"] == "200"
    assert reason_of(ctx.trailer) == ErrorReason.LIMIT_REACHED.value  # the code's generic reason


class _RpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str, reason: ErrorReason | None) -> None:
        self._code, self._details = code, details
        self._md = (details_trailer(code.value[0], details, reason),) if reason else ()

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> Any:
        return self._md


def test_the_client_goes_by_the_reason_whatever_the_message_says() -> None:
    reworded = translate(_RpcError(grpc.StatusCode.UNAVAILABLE, "bye", ErrorReason.SHUTTING_DOWN), "h:1")
    assert isinstance(reworded, Unavailable) and "stopped or restarting" in reworded.message
    assert reworded.reason == ErrorReason.SHUTTING_DOWN.value
    # the reason alone decides: the client never reads the daemon's wording, not even a daemon that sends no reason
    assert _in_use(ErrorReason.TRACE_ID_IN_USE.value)
    assert not _in_use(ErrorReason.INVALID_REQUEST.value)
    assert not _in_use("")
    assert restarted_text(ErrorReason.TRACE_FORGOTTEN.value)
    assert not restarted_text(ErrorReason.TRACE_NOT_FOUND.value)
    assert not restarted_text("")
    no_reason = translate(_RpcError(grpc.StatusCode.UNAVAILABLE, "dynod is shutting down", None), "h:1")
    assert no_reason.reason == "" and "stopped or restarting" not in no_reason.message


class _RetryClient:
    """Unavailable once, then refused with TRACE_ID_IN_USE in other words: the first attempt had started it."""

    timeout_s = 10.0

    def __init__(self) -> None:
        self.calls = 0

    def start_trace(self, request: dyno_pb2.TraceRequest) -> dyno_pb2.StartTraceResponse:
        self.calls += 1
        if self.calls == 1:
            raise Unavailable("connect failed")
        raise InvalidArgument("trace_id: taken", reason=ErrorReason.TRACE_ID_IN_USE.value)

    def get_trace(self, trace_id: str) -> dyno_pb2.TraceStatus:
        return dyno_pb2.TraceStatus(trace_id=trace_id, hostname="h")


def test_a_retried_start_refused_as_in_use_reads_the_trace_back_by_its_reason() -> None:
    resp = start_trace_retrying(_RetryClient(), dyno_pb2.TraceRequest(trace_id="t1"))  # type: ignore[arg-type]
    assert resp.trace_id == "t1" and resp.message == "started (confirmed after a retry)"


def _agent_trace(tmp_path: Path) -> tuple[ProcessRegistry, TraceManager, str]:
    reg = ProcessRegistry(is_alive=lambda pid: True, uid_of=lambda pid: os.getuid())
    reg.register(RegisteredProcess(pid=4242, job_id="j", protocol=PROTOCOL_AGENT, uid=os.getuid(), session_id="s"))
    tm = TraceManager(reg, tmp_path / "traces", "hostR")
    tid = tm.start(TraceSpec(job_id="j", duration_ms=60_000)).trace_id
    tm.agent_delivered(4242, tid)
    tm.agent_report(4242, tid, TraceState.RUNNING)
    return reg, tm, tid


def test_each_process_state_has_its_reason_on_the_wire_and_in_the_record(tmp_path: Path) -> None:
    reg, tm, tid = _agent_trace(tmp_path)
    reg.remove(4242, GONE_REASON, session_id="s")  # its Watch stream ended mid-trace
    p = tm.get(tid).processes[0]
    assert p.state == TraceState.FAILED and p.reason == TraceReason.DISCONNECTED_MID_TRACE
    assert process_trace_to_pb(p).reason == dyno_pb2.TRACE_REASON_DISCONNECTED_MID_TRACE
    assert tj.load_record(tmp_path / "traces", tid).processes[0].reason == TraceReason.DISCONNECTED_MID_TRACE  # type: ignore[union-attr]
    # every reason has its proto value
    assert set(REASON_TO_PB) == set(TraceReason) and len(set(REASON_TO_PB.values())) == len(TraceReason)


def test_a_done_report_after_a_disconnect_revives_by_the_reason_not_the_text(tmp_path: Path) -> None:
    reg, tm, tid = _agent_trace(tmp_path)
    reg.remove(4242, GONE_REASON, session_id="s")
    entry = tm.table.traces[tid]
    pt = entry.procs[4242]
    from dataclasses import replace

    pt.view = replace(pt.view, error="worded otherwise")  # the reason, not the text, says what happened
    Path(pt.view.path).write_bytes(b"trace")
    reg.register(RegisteredProcess(pid=4242, job_id="j", protocol=PROTOCOL_AGENT, uid=os.getuid(), session_id="s2"))
    tm.agent_report(4242, tid, TraceState.DONE)
    p = tm.get(tid).processes[0]
    assert p.state == TraceState.DONE and p.reason == TraceReason.DONE_AFTER_RECONNECT


def test_a_late_done_report_is_noted_once(tmp_path: Path) -> None:
    _reg, tm, tid = _agent_trace(tmp_path)
    tm.cancel(tid)
    tm.agent_report(4242, tid, TraceState.DONE)
    once = tm.get(tid).processes[0]
    assert once.late_done and once.reason == TraceReason.CANCELLED_BY_REQUEST
    tm.agent_report(4242, tid, TraceState.DONE)
    assert tm.get(tid).processes[0].error == once.error

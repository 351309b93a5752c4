"""GetTraceSummary over Analyses: states (PENDING, RUNNING, DONE, FAILED, DISABLED), rank parts on request only,
NOT_FOUND with the trace manager's reason, INVALID_ARGUMENT, and the per-user rules."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from analysis_fakes import ME, NAMES, OTHER, analyses, view
from grpc_context import Aborted, AbortingContext

from dyno.daemon.analysis.outcome import Outcome
from dyno.daemon.analysis.rpc import GetTraceSummaryRpc
from dyno.daemon.callers import Caller
from dyno.daemon.jobs.store import JobStore
from dyno.daemon.tracing.values import TraceState, TraceView, UnknownTraceError
from dyno.error_reasons import ErrorReason
from dyno.trace_summary import AnalysisState, RuleLoss, TraceSummary
from dyno.v1 import dyno_pb2

from conftest import wait_for

pytestmark = pytest.mark.unit

ADMIN = Caller(0, True, "uid 0")
ALICE = Caller(ME, False, f"uid {ME}")
BOB = Caller(OTHER, False, f"uid {OTHER}")
NOBODY = Caller(None, False, "an unidentified caller")


class _Trailer(AbortingContext):
    reason = ""

    def set_trailing_metadata(self, md: tuple) -> None:
        from dyno.error_reasons import reason_of

        self.reason = reason_of(md) or ""


def _views(*views: TraceView):  # type: ignore[no-untyped-def]
    known = {v.trace_id: v for v in views}

    def get(trace_id: str) -> TraceView:
        if trace_id not in known:
            raise UnknownTraceError(f"no trace {trace_id!r}", ErrorReason.TRACE_NOT_FOUND)
        return known[trace_id]

    return get


def _ask(rpc: GetTraceSummaryRpc, trace_id: str, parts: bool = False) -> dyno_pb2.TraceSummary:
    return rpc(dyno_pb2.GetTraceSummaryRequest(trace_id=trace_id, include_rank_parts=parts), AbortingContext())  # type: ignore[arg-type]


def _refused(rpc: GetTraceSummaryRpc, trace_id: str) -> tuple[grpc.StatusCode, str, str]:
    ctx = _Trailer()
    with pytest.raises(Aborted) as e:
        rpc(dyno_pb2.GetTraceSummaryRequest(trace_id=trace_id), ctx)  # type: ignore[arg-type]
    return e.value.code, ctx.reason, e.value.details


def _rpc(tmp_path: Path, caller: Caller, *views: TraceView):  # type: ignore[no-untyped-def]
    a = analyses(tmp_path, db=JobStore.in_dir(tmp_path))
    done = TraceSummary(
        "done", job_id="job-1", user="alice", state=AnalysisState.DONE, rules=(RuleLoss("x", "LOW", 0.2),)
    )
    a.store.save(Outcome(done, b"\x1f\x8bparts", True), b"", now_ms=9000)
    return a, GetTraceSummaryRpc(a, _views(*views), "node1", lambda context: caller, NAMES.__getitem__)


def test_states_of_a_trace_and_its_summary_with_parts_only_on_request(tmp_path: Path) -> None:
    running = view("running", TraceState.RUNNING, finished=False)
    waiting = view("waiting", TraceState.DONE)
    a, rpc = _rpc(tmp_path, ALICE, running, waiting)
    m = _ask(rpc, "running")
    assert (m.state, m.job_id, m.user, m.hostname) == (dyno_pb2.ANALYSIS_STATE_PENDING, "job-1", "alice", "node1")
    m = _ask(rpc, "waiting")  # finished, never analysed here (the queue's thread is not started): queued now
    assert m.state == dyno_pb2.ANALYSIS_STATE_PENDING and a.state_of("waiting") == AnalysisState.PENDING
    m = _ask(rpc, "done")
    assert m.state == dyno_pb2.ANALYSIS_STATE_DONE and m.rules[0].rule == "x" and not m.rank_parts
    m = _ask(rpc, "done", parts=True)
    assert m.rank_parts == b"\x1f\x8bparts" and m.rank_parts_thinned
    a.queue._running = "running"
    assert _ask(rpc, "running").state == dyno_pb2.ANALYSIS_STATE_RUNNING
    a.stop()


def test_a_trace_that_wrote_no_file_answers_trace_failed(tmp_path: Path) -> None:
    a, rpc = _rpc(tmp_path, ADMIN, view("nofile", TraceState.TIMED_OUT))
    m = _ask(rpc, "nofile")
    assert (m.state, m.failure) == (dyno_pb2.ANALYSIS_STATE_FAILED, dyno_pb2.ANALYSIS_FAILURE_TRACE_FAILED)
    a.start()
    stored = wait_for(lambda: a.store.get("nofile"), 10)  # written by the queue's thread
    assert stored.summary.failure_message.startswith("the trace wrote no file: pid 100 timed_out")
    assert _ask(rpc, "nofile").failure == dyno_pb2.ANALYSIS_FAILURE_TRACE_FAILED
    a.stop()


def test_disabled_analysis_answers_disabled_for_known_traces(tmp_path: Path) -> None:
    rpc = GetTraceSummaryRpc(None, _views(view("t", TraceState.DONE)), "node1", lambda context: ADMIN, NAMES.get)  # type: ignore[arg-type]
    assert _ask(rpc, "t").state == dyno_pb2.ANALYSIS_STATE_DISABLED
    assert _refused(rpc, "unknown")[:2] == (grpc.StatusCode.NOT_FOUND, "TRACE_NOT_FOUND")


def test_unknown_and_invalid_ids_and_the_per_user_rules(tmp_path: Path) -> None:
    theirs = view("theirs", TraceState.RUNNING, uid=OTHER, finished=False)
    a, alice = _rpc(tmp_path, ALICE, theirs)
    assert _refused(alice, "nope")[:2] == (grpc.StatusCode.NOT_FOUND, "TRACE_NOT_FOUND")
    code, _, details = _refused(alice, "bad id!")
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("trace_id:")
    assert _refused(alice, "theirs")[:2] == (grpc.StatusCode.PERMISSION_DENIED, "NOT_YOUR_PROCESS")
    bob = GetTraceSummaryRpc(a, _views(theirs), "node1", lambda context: BOB, NAMES.__getitem__)
    assert _refused(bob, "done")[:2] == (grpc.StatusCode.PERMISSION_DENIED, "NOT_YOUR_PROCESS")  # alice's summary
    assert _ask(bob, "theirs").state == dyno_pb2.ANALYSIS_STATE_PENDING
    nobody = GetTraceSummaryRpc(a, _views(theirs), "node1", lambda context: NOBODY, NAMES.__getitem__)
    assert _refused(nobody, "done")[:2] == (grpc.StatusCode.PERMISSION_DENIED, "CALLER_UNKNOWN")
    admin = GetTraceSummaryRpc(a, _views(theirs), "node1", lambda context: ADMIN, NAMES.__getitem__)
    assert _ask(admin, "done").user == "alice" and _ask(admin, "theirs").user == "bob"
    a.stop()

"""ListProcesses answers at most MAX_PROCESS_LIST_BYTES: the registry takes a Register for any live pid from any
local user (the agent socket is 0666), so a flood of records made an answer no client accepts, built in full by the
daemon first."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from fake_proc import no_proc_identifier
from grpc_context import Aborted, AbortingContext

from dyno.daemon import trace_service
from dyno.daemon.registry import PROTOCOL_AGENT, ProcessRecord, ProcessRegistry
from dyno.daemon.trace_manager import TraceManager
from dyno.daemon.trace_service import TraceRpcs
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def _rpcs(jobs: dict[str, int]) -> TraceRpcs:
    registry = ProcessRegistry(is_alive=lambda pid: True)
    pid = 100
    for job, n in jobs.items():
        for _ in range(n):
            pid += 1
            registry.register(ProcessRecord(pid=pid, job_id=job, protocol=PROTOCOL_AGENT, cmdline="x" * 4000))
    # the manager tells each process's role (its trace dir is never made: nothing is traced)
    manager = TraceManager(registry, Path("/nonexistent/traces"), "node1", kineto_identifier=no_proc_identifier())
    return TraceRpcs(manager, registry, "node1")


def _list(rpcs: TraceRpcs, job_id: str = "") -> dyno_pb2.ListProcessesResponse:
    return rpcs.ListProcesses(dyno_pb2.ListProcessesRequest(job_id=job_id), AbortingContext())  # type: ignore[arg-type]


def test_an_answer_past_the_bound_is_refused_naming_the_count_and_the_job_filter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rpcs = _rpcs({"flood": 40, "train": 3})
    monkeypatch.setattr(trace_service, "MAX_PROCESS_LIST_BYTES", 20 * 4100)
    with pytest.raises(Aborted) as e:
        _list(rpcs)
    assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "the 43 processes registered for all jobs" in e.value.details and "job_id" in e.value.details
    got = _list(rpcs, "train")  # one job still fits
    assert [p.job_id for p in got.processes] == ["train"] * 3 and got.hostname == "node1"


def test_within_the_bound_every_process_is_listed_and_the_answer_fits_what_dyno_cli_receives() -> None:
    from dyno.client.client import MAX_RECEIVE_BYTES

    got = _list(_rpcs({"a": 5, "b": 2}))
    assert [(p.job_id, p.cmdline[:1]) for p in got.processes] == [("a", "x")] * 5 + [("b", "x")] * 2
    assert trace_service.MAX_PROCESS_LIST_BYTES <= MAX_RECEIVE_BYTES // 2

"""ListProcesses answers at most MAX_PROCESS_LIST_BYTES (within a stock client's 4 MiB): the registry takes a Register
for any live pid from any local user (the agent socket is 0666), so a flood of records made an answer no client
accepts, built in full by the daemon first. Past the bound command lines are cut to their share, then pages follow."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from fake_proc import no_proc_identifier
from grpc_context import Aborted, AbortingContext

from dyno.daemon.answer_bounds import ELLIPSIS
from dyno.daemon.registry import PROTOCOL_AGENT, ProcessRecord, ProcessRegistry
from dyno.daemon.tracing import service as trace_service
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.service import TraceRpcs
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


def _list(rpcs: TraceRpcs, job_id: str = "", token: str = "") -> dyno_pb2.ListProcessesResponse:
    request = dyno_pb2.ListProcessesRequest(job_id=job_id, page_token=token)
    return rpcs.ListProcesses(request, AbortingContext())  # type: ignore[arg-type]


def test_past_the_bound_every_process_is_listed_with_its_command_line_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    rpcs = _rpcs({"flood": 40, "train": 3})
    monkeypatch.setattr(trace_service, "MAX_PROCESS_LIST_BYTES", 20 * 4100)
    got = _list(rpcs)
    assert len(got.processes) == 43 and not got.next_page_token and got.ByteSize() <= 20 * 4100
    assert all(p.cmdline.startswith("x" * 200) and p.cmdline.endswith(ELLIPSIS) for p in got.processes)
    one = _list(rpcs, "train")  # one job fits whole
    assert [p.job_id for p in one.processes] == ["train"] * 3 and one.processes[0].cmdline == "x" * 4000


def test_what_still_does_not_fit_comes_in_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    rpcs = _rpcs({"flood": 40, "train": 3})
    monkeypatch.setattr(trace_service, "MAX_PROCESS_LIST_BYTES", 5000)
    pages = [_list(rpcs)]
    while pages[-1].next_page_token:
        pages.append(_list(rpcs, token=pages[-1].next_page_token))
    assert len(pages) >= 3 and all(p.ByteSize() <= 5000 and p.hostname == "node1" for p in pages)
    assert [p.pid for page in pages for p in page.processes] == list(range(101, 144))  # each once, in order
    with pytest.raises(Aborted) as e:
        _list(rpcs, token="not-a-token")
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and e.value.details.startswith("page_token:")


def test_within_the_bound_every_process_is_listed_and_the_answer_fits_what_dyno_cli_receives() -> None:
    from dyno.client.client import MAX_RECEIVE_BYTES

    got = _list(_rpcs({"a": 5, "b": 2}))
    assert [(p.job_id, p.cmdline[:1]) for p in got.processes] == [("a", "x")] * 5 + [("b", "x")] * 2
    assert trace_service.MAX_PROCESS_LIST_BYTES < min(4 * 1024 * 1024, MAX_RECEIVE_BYTES // 2)

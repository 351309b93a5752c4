"""ListProcesses: each answer is the registry as it is now, though each process's message is kept between calls
(process_listing.ProcessFields), the whole registry's answer is patched where records changed
(process_listing.WholeListing), and the roles and the DataLoader-worker checks behind them are reused for a second
(process_listing.RolesCache, TraceManager.roles): a changed record, a role that changed and a process that left
show in the next answer; an answer stays within MAX_PROCESS_LIST_BYTES (a stock client's 4 MiB)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from fake_proc import no_proc_identifier
from grpc_context import Aborted, AbortingContext
from manual_clock import Clock

from dyno.daemon.answer_bounds import ELLIPSIS
from dyno.daemon.registered_process import PROTOCOL_AGENT, PROTOCOL_KINETO, RegisteredProcess
from dyno.daemon.registry import ProcessRegistry
from dyno.daemon.tracing import service as trace_service
from dyno.daemon.tracing.kineto_identity import KinetoIdentifier
from dyno.daemon.tracing.manager import LISTED_WORKERS_MAX_AGE_MS, TraceManager
from dyno.daemon.tracing.service import TraceRpcs
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


def _rpcs(tmp_path: Path, comm: dict[int, bytes], clock: Clock) -> tuple[TraceRpcs, ProcessRegistry]:
    reg = ProcessRegistry(is_alive=lambda pid: True, uid_of=lambda pid: 1000, clock_ms=clock)
    identifier = KinetoIdentifier(read=lambda pid, name, limit: comm.get(pid, b"python\n"))
    manager = TraceManager(reg, tmp_path / "traces", "hostL", clock_ms=clock, kineto_identifier=identifier)
    return TraceRpcs(manager, reg, "hostL"), reg


def _listed(rpcs: TraceRpcs, job_id: str = "") -> dict[int, dyno_pb2.ProcessInfo]:
    answer = rpcs.ListProcesses(dyno_pb2.ListProcessesRequest(job_id=job_id), None)  # type: ignore[arg-type]
    return {p.pid: p for p in answer.processes}


def test_a_changed_record_shows_in_the_next_answer(tmp_path: Path) -> None:
    clock = Clock(ms=1_000_000)
    rpcs, reg = _rpcs(tmp_path, {}, clock)
    reg.register(RegisteredProcess(pid=101, job_id="J", protocol=PROTOCOL_AGENT, cmdline="python a.py"))
    reg.register(RegisteredProcess(pid=102, job_id="J", protocol=PROTOCOL_AGENT))
    first = _listed(rpcs)
    assert not first[101].busy
    reg.set_busy(101, "t1")
    clock.ms += 500
    reg.touch(102)
    second = _listed(rpcs)
    assert second[101].busy and second[101].current_trace_id == "t1"
    assert second[102].last_seen_ms == first[102].last_seen_ms + 500
    second[101].cmdline = "edited by a caller"  # an answer is the caller's own copy (the auth redaction edits it)
    assert _listed(rpcs)[101].cmdline == "python a.py"
    reg.remove(102, "test")
    assert set(_listed(rpcs)) == {101}


def test_a_process_that_became_a_data_worker_shows_as_one_within_the_memo_age(tmp_path: Path) -> None:
    clock = Clock(ms=1_000_000)
    comm = {202: b"python\n"}
    rpcs, reg = _rpcs(tmp_path, comm, clock)
    reg.register(RegisteredProcess(pid=201, job_id="7", protocol=PROTOCOL_KINETO, ancestry=()))
    reg.register(RegisteredProcess(pid=202, job_id="7", protocol=PROTOCOL_KINETO, ancestry=(201,)))
    assert _listed(rpcs)[202].role == dyno_pb2.PROCESS_ROLE_TRAINER
    comm[202] = b"pt_data_worker\n"  # torch names a worker once its loop runs
    clock.ms += LISTED_WORKERS_MAX_AGE_MS
    listed = _listed(rpcs)
    assert listed[202].role == dyno_pb2.PROCESS_ROLE_DATALOADER
    assert listed[201].role == dyno_pb2.PROCESS_ROLE_TRAINER  # a worker makes no launcher of its trainer


# ListProcesses answers at most MAX_PROCESS_LIST_BYTES (within a stock client's 4 MiB)


def _rpcs_list_bound(jobs: dict[str, int]) -> TraceRpcs:
    registry = ProcessRegistry(is_alive=lambda pid: True)
    pid = 100
    for job, n in jobs.items():
        for _ in range(n):
            pid += 1
            registry.register(RegisteredProcess(pid=pid, job_id=job, protocol=PROTOCOL_AGENT, cmdline="x" * 4000))
    # the manager tells each process's role (its trace dir is never made: nothing is traced)
    manager = TraceManager(registry, Path("/nonexistent/traces"), "node1", kineto_identifier=no_proc_identifier())
    return TraceRpcs(manager, registry, "node1")


def _list(rpcs: TraceRpcs, job_id: str = "", token: str = "") -> dyno_pb2.ListProcessesResponse:
    request = dyno_pb2.ListProcessesRequest(job_id=job_id, page_token=token)
    return rpcs.ListProcesses(request, AbortingContext())  # type: ignore[arg-type]


def test_past_the_bound_every_process_is_listed_with_its_command_line_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    rpcs = _rpcs_list_bound({"flood": 40, "train": 3})
    monkeypatch.setattr(trace_service, "MAX_PROCESS_LIST_BYTES", 20 * 4100)
    got = _list(rpcs)
    assert len(got.processes) == 43 and not got.next_page_token and got.ByteSize() <= 20 * 4100
    assert all(p.cmdline.startswith("x" * 200) and p.cmdline.endswith(ELLIPSIS) for p in got.processes)
    one = _list(rpcs, "train")  # one job fits whole
    assert [p.job_id for p in one.processes] == ["train"] * 3 and one.processes[0].cmdline == "x" * 4000


def test_what_still_does_not_fit_comes_in_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    rpcs = _rpcs_list_bound({"flood": 40, "train": 3})
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

    got = _list(_rpcs_list_bound({"a": 5, "b": 2}))
    assert [(p.job_id, p.cmdline[:1]) for p in got.processes] == [("a", "x")] * 5 + [("b", "x")] * 2
    assert trace_service.MAX_PROCESS_LIST_BYTES < min(4 * 1024 * 1024, MAX_RECEIVE_BYTES // 2)

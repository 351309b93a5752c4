"""ListProcesses answers as the registry is now, though each process's message is kept between calls
(service._ProcessInfoCache) and the DataLoader-worker checks behind the roles are reused for a second
(TraceManager.roles): a changed record, a role that changed and a process that left show in the next answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from dyno.daemon.registry import PROTOCOL_AGENT, PROTOCOL_KINETO, ProcessRecord, ProcessRegistry
from dyno.daemon.tracing.kineto_identity import KinetoIdentifier
from dyno.daemon.tracing.manager import LISTED_WORKERS_MAX_AGE_MS, TraceManager
from dyno.daemon.tracing.service import TraceRpcs
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit


class _Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def _rpcs(tmp_path: Path, comm: dict[int, bytes], clock: _Clock) -> tuple[TraceRpcs, ProcessRegistry]:
    reg = ProcessRegistry(is_alive=lambda pid: True, uid_of=lambda pid: 1000, clock_ms=clock)
    identifier = KinetoIdentifier(read=lambda pid, name, limit: comm.get(pid, b"python\n"))
    manager = TraceManager(reg, tmp_path / "traces", "hostL", clock_ms=clock, kineto_identifier=identifier)
    return TraceRpcs(manager, reg, "hostL"), reg


def _listed(rpcs: TraceRpcs, job_id: str = "") -> dict[int, dyno_pb2.ProcessInfo]:
    answer = rpcs.ListProcesses(dyno_pb2.ListProcessesRequest(job_id=job_id), None)  # type: ignore[arg-type]
    return {p.pid: p for p in answer.processes}


def test_a_changed_record_shows_in_the_next_answer(tmp_path: Path) -> None:
    clock = _Clock()
    rpcs, reg = _rpcs(tmp_path, {}, clock)
    reg.register(ProcessRecord(pid=101, job_id="J", protocol=PROTOCOL_AGENT, cmdline="python a.py"))
    reg.register(ProcessRecord(pid=102, job_id="J", protocol=PROTOCOL_AGENT))
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
    clock = _Clock()
    comm = {202: b"python\n"}
    rpcs, reg = _rpcs(tmp_path, comm, clock)
    reg.register(ProcessRecord(pid=201, job_id="7", protocol=PROTOCOL_KINETO, ancestry=()))
    reg.register(ProcessRecord(pid=202, job_id="7", protocol=PROTOCOL_KINETO, ancestry=(201,)))
    assert _listed(rpcs)[202].role == dyno_pb2.PROCESS_ROLE_TRAINER
    comm[202] = b"pt_data_worker\n"  # torch names a worker once its loop runs
    clock.ms += LISTED_WORKERS_MAX_AGE_MS
    listed = _listed(rpcs)
    assert listed[202].role == dyno_pb2.PROCESS_ROLE_DATALOADER
    assert listed[201].role == dyno_pb2.PROCESS_ROLE_TRAINER  # a worker makes no launcher of its trainer

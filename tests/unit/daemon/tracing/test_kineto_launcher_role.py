"""torch's launcher on the kineto path: libkineto registers every process that imports torch, `torchrun` included;
dynod reads the sender's /proc/<pid>/cmdline once (cached with the registration), as the agent's bootstrap reads its
own, and a trace never includes the launcher: a job-wide --iterations trace takes just the workers, `--pids
<launcher>` selects its workers by ancestry. And each process's role (trainer, launcher, dataloader), computed by
one rule for --process-limit and for ListProcesses / `dyno-cli ps`. /proc is faked; the ps test runs a real gRPC
server on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from fake_proc import ProcTable, kineto_manager

from dyno.client.cli import main as cli_main
from dyno.client.cluster import HostResult
from dyno.client.commands.ps import render
from dyno.client.hosts import Host
from dyno.daemon.history import History
from dyno.daemon.process_roles import (
    ROLE_DATALOADER,
    ROLE_LAUNCHER,
    ROLE_TRAINER,
    job_roles,
    order_for_limit,
    process_roles,
)
from dyno.daemon.registered_process import PROTOCOL_AGENT, PROTOCOL_KINETO, RegisteredProcess
from dyno.daemon.server import DynoServicer, add_to_server
from dyno.daemon.tracing.kineto_identity import KinetoIdentifier
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.manager import TraceManager
from dyno.daemon.tracing.service import TraceRpcs
from dyno.daemon.tracing.values import TraceSpec
from dyno.v1 import dyno_pb2

pytestmark = pytest.mark.unit

TORCHRUN = b"/venv/bin/python3\0/venv/bin/torchrun\0--standalone\0--nproc-per-node\x002\0train.py\0"
RUN_MODULE = b"python\0-u\0-m\0torch.distributed.run\0--nproc-per-node=2\0train.py\0"
WORKER = b"/venv/bin/python3\0-u\0train.py\0"
SPAWN = b"python\0-c\0from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=4, pipe_handle=6)\0"


def poll(pid: int, *ancestry: int, job: str = "7") -> KinetoPoll:
    return KinetoPoll(pid=pid, ancestry=ancestry, job_id=job, type_mask=3)


def rec(pid: int, ancestry: tuple[int, ...] = (), *, job: str = "7", launcher: str = "") -> RegisteredProcess:
    return RegisteredProcess(pid=pid, job_id=job, protocol=PROTOCOL_KINETO, ancestry=ancestry, launcher=launcher)


def torchrun_job(tmp_path: Path) -> tuple[TraceManager, ProcTable]:
    """`torchrun --nproc-per-node 2` under KINETO_USE_DAEMON=1: the launcher 100 (its parent: a shell, 50) and its
    workers 101 and 102, all three registered by libkineto."""
    proc = ProcTable({100: ("python3", TORCHRUN), 101: ("python3", WORKER), 102: ("python3", WORKER)})
    return kineto_manager(tmp_path, proc, [poll(100, 50), poll(101, 100, 50), poll(102, 100, 50)]), proc


# -- identity -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cmdline, launcher",
    [
        (TORCHRUN, "torchrun"),
        (RUN_MODULE, "torch.distributed.run"),
        (b"python3\0-m\0torch.distributed.launch\0--use-env\0t.py\0", "torch.distributed.launch"),
        (WORKER, ""),
        (SPAWN, ""),
        (b"python\0-c\0from torch.distributed.run import main; main()\0", ""),  # not recognised (documented)
        (b"", ""),  # a kernel thread's, or a zombie's: empty
    ],
)
def test_identity_reads_the_launcher_from_the_command_line(cmdline: bytes, launcher: str) -> None:
    ident = KinetoIdentifier(ProcTable({5: ("python", cmdline)})).identify(5, "7")
    assert ident.launcher == launcher
    assert ident.cmdline == cmdline.rstrip(b"\0").replace(b"\0", b" ").decode()


def test_unreadable_command_line_is_no_launcher() -> None:
    ident = KinetoIdentifier(ProcTable({})).identify(5, "7")
    assert ident.launcher == "" and ident.cmdline == "" and ident.job_id == "7"


def test_the_role_is_recorded_with_the_registration_and_read_once(tmp_path: Path) -> None:
    tm, proc = torchrun_job(tmp_path)
    assert tm._registry.get(100).launcher == "torchrun"  # type: ignore[union-attr]
    assert tm._registry.get(101).launcher == ""  # type: ignore[union-attr]
    for _ in range(3):  # libkineto polls every few seconds: the command line is not read again
        tm.kineto_poll(poll(100, 50))
    assert proc.reads.count((100, "cmdline")) == 1
    assert tm._registry.get(100).launcher == "torchrun"  # type: ignore[union-attr]


# -- tracing --------------------------------------------------------------------------------------------------------


def test_job_wide_iteration_trace_takes_just_the_workers(tmp_path: Path) -> None:
    tm, _ = torchrun_job(tmp_path)
    r = tm.start(TraceSpec(job_id="7", iterations=2))
    assert sorted(v.pid for v in r.triggered) == [101, 102]
    assert sorted(r.matched_pids) == [101, 102]  # the launcher is no candidate at all
    assert not tm._registry.get(100).busy  # type: ignore[union-attr]
    assert tm.kineto_poll(poll(100, 50)) is None  # it is handed no config
    assert tm.kineto_poll(poll(101, 100, 50)) is not None


def test_pids_naming_the_launcher_select_its_workers_not_itself(tmp_path: Path) -> None:
    tm, _ = torchrun_job(tmp_path)
    r = tm.start(TraceSpec(job_id="7", duration_ms=500, pids=(100,)))
    assert sorted(v.pid for v in r.triggered) == [101, 102]
    r = tm.start(TraceSpec(job_id="7", duration_ms=500, pids=(100,)))  # both busy now: the launcher still not taken
    assert r.triggered == () and sorted(r.busy_pids) == [101, 102]


def test_a_launcher_alone_is_not_traced_and_the_answer_says_why(tmp_path: Path) -> None:
    proc = ProcTable({100: ("python3", RUN_MODULE)})
    tm = kineto_manager(tmp_path, proc, [poll(100, 50)])  # the workers have not imported torch yet
    for spec in (TraceSpec(job_id="7", iterations=1), TraceSpec(job_id="7", duration_ms=500, pids=(100,))):
        r = tm.start(spec)
        assert r.triggered == () and r.matched_pids == ()
        assert "only torch's launcher of job '7'" in r.message and "pid 100 (torch.distributed.run)" in r.message
        assert "never traced" in r.message
    r = tm.start(TraceSpec(job_id="7", duration_ms=500, pids=(999,)))
    assert "none with pid(s) 999" in r.message  # a filter that names no launcher: the usual reason


def test_process_limit_counts_without_the_launcher(tmp_path: Path) -> None:
    tm, _ = torchrun_job(tmp_path)
    r = tm.start(TraceSpec(job_id="7", duration_ms=500, process_limit=3))
    assert sorted(v.pid for v in r.triggered) == [101, 102]


# -- roles ----------------------------------------------------------------------------------------------------------


def test_process_roles() -> None:
    procs = [
        rec(100, (50,), launcher="torchrun"),  # torch's launcher, whatever else
        rec(200, (100, 50)),  # a torch.multiprocessing.spawn parent under it: in 201's ancestry
        rec(201, (200, 100, 50)),
        rec(301, (201, 200, 100, 50)),  # 201's DataLoader worker: 201 stays a trainer
        rec(400, (60,)),  # alone
    ]
    roles = process_roles(procs, data_workers={301})
    assert roles == {100: ROLE_LAUNCHER, 200: ROLE_LAUNCHER, 201: ROLE_TRAINER, 301: ROLE_DATALOADER, 400: ROLE_TRAINER}
    # without knowing 301 is a DataLoader worker, its ancestry makes a launcher of 201
    assert process_roles(procs)[201] == ROLE_LAUNCHER
    # --process-limit takes them in role order: trainers (by rank, pid), launchers, DataLoader workers
    assert [p.pid for p in order_for_limit(procs, {301})] == [201, 400, 100, 200, 301]


def test_job_roles_keep_jobs_apart() -> None:
    # 10 (job a) started 11 of job b: within job a it is alone, so a trainer, as a request for job a sees it
    procs = [rec(10, (1,), job="a"), rec(11, (10,), job="b"), rec(12, (11,), job="b")]
    assert job_roles(procs) == {10: ROLE_TRAINER, 11: ROLE_LAUNCHER, 12: ROLE_TRAINER}
    assert process_roles(procs)[10] == ROLE_LAUNCHER


def test_manager_roles_read_data_workers_from_proc(tmp_path: Path) -> None:
    proc = ProcTable(
        {100: ("python3", TORCHRUN), 101: ("python3", WORKER), 201: ("pt_data_worker", SPAWN), 5: ("x", b"")}
    )
    tm = kineto_manager(tmp_path, proc, [poll(100, 50), poll(101, 100, 50), poll(201, 101, 100, 50)])
    tm._registry.register(RegisteredProcess(pid=5, job_id="7", protocol=PROTOCOL_AGENT, ancestry=(100,), rank=0))
    roles = tm.roles(tm._registry.list())
    assert roles == {100: ROLE_LAUNCHER, 101: ROLE_TRAINER, 201: ROLE_DATALOADER, 5: ROLE_TRAINER}
    assert (5, "comm") not in proc.reads  # the agent never registers a DataLoader worker: no /proc read


# -- ps through a real loopback server ------------------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, TraceManager]]:
    proc = ProcTable(
        {100: ("python3", TORCHRUN), 101: ("python3", WORKER), 102: ("python3", WORKER), 201: ("pt_data_worker", SPAWN)}
    )
    tm = kineto_manager(
        tmp_path, proc, [poll(100, 50), poll(101, 100, 50), poll(102, 100, 50), poll(201, 101, 100, 50)]
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    rpcs = TraceRpcs(tm, tm._registry, "hostA")
    add_to_server(DynoServicer(lambda: dyno_pb2.Status(), History(2), "hostA", trace_rpcs=rpcs), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", tm
    finally:
        server.stop(0)


def test_ps_shows_each_process_role(served: tuple[str, TraceManager], capsys: pytest.CaptureFixture[str]) -> None:
    target, _ = served
    assert cli_main(["ps", "--host", target, "--json"]) == 0
    rows = {r["pid"]: r for r in json.loads(capsys.readouterr().out)["processes"]}
    assert {pid: r["role"] for pid, r in rows.items()} == {
        100: "PROCESS_ROLE_LAUNCHER",
        101: "PROCESS_ROLE_TRAINER",
        102: "PROCESS_ROLE_TRAINER",
        201: "PROCESS_ROLE_DATALOADER",
    }
    assert cli_main(["ps", "--host", target, "--job-id", "7"]) == 0
    header, _rule, *lines = capsys.readouterr().out.splitlines()
    assert header.split()[:6] == ["HOST", "PID", "JOB", "RANK", "ROLE", "PROTOCOL"]
    roles = {int(line.split()[1]): line.split()[4] for line in lines}
    assert roles == {100: "launcher", 101: "trainer", 102: "trainer", 201: "dataloader"}


def test_ps_of_a_daemon_without_roles_shows_a_dash() -> None:
    answer = dyno_pb2.ListProcessesResponse(processes=[dyno_pb2.ProcessInfo(pid=7, job_id="j", last_seen_ms=0)])
    header, _rule, line = render([HostResult(Host("gpu1"), True, value=answer)], now_ms=0).splitlines()
    assert line.split()[header.split().index("ROLE")] == "-"

"""`--process-limit` among kineto processes: DataLoader workers (helpers, named `pt_data_worker` by torch) come
after the trainers they serve, and do not make a launcher of their trainer; torch.multiprocessing.spawn trainers
stay leaves. /proc is faked."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_proc import ProcTable as Proc
from fake_proc import kineto_manager

from dyno.daemon.registered_process import PROTOCOL_KINETO, RegisteredProcess
from dyno.daemon.tracing.kineto_identity import KinetoIdentifier
from dyno.daemon.tracing.kineto_ipc import KinetoPoll
from dyno.daemon.tracing.manager import order_for_limit
from dyno.daemon.tracing.values import TraceSpec

pytestmark = pytest.mark.unit

SPAWN_CMDLINE = b"python\0-c\0from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=4, pipe_handle=6)\0"


def kineto(pid: int, ancestry: tuple[int, ...]) -> RegisteredProcess:
    return RegisteredProcess(pid=pid, job_id="7", protocol=PROTOCOL_KINETO, ancestry=ancestry)


def poll(pid: int, *ancestry: int) -> KinetoPoll:
    return KinetoPoll(pid=pid, ancestry=ancestry, job_id="7", type_mask=3)


def test_is_data_worker_reads_the_kernel_task_name() -> None:
    ident = KinetoIdentifier(Proc({10: ("python", b""), 11: ("pt_data_worker", SPAWN_CMDLINE)}))
    assert not ident.is_data_worker(10)
    assert ident.is_data_worker(11)
    assert not ident.is_data_worker(12)  # gone or unreadable: not a helper


def test_order_puts_helpers_last_and_keeps_their_parent_a_leaf() -> None:
    trainer, worker = kineto(100, (50,)), kineto(101, (100, 50))
    assert [p.pid for p in order_for_limit([trainer, worker])] == [101, 100]  # without knowing: the worker
    assert [p.pid for p in order_for_limit([trainer, worker], {101})] == [100, 101]


def test_process_limit_picks_the_trainer_not_its_dataloader_worker(tmp_path: Path) -> None:
    # A KINETO_USE_DAEMON=1 trainer (100) and its spawn-started DataLoader worker (101), which registers too.
    proc = Proc({100: ("python", b"python\0train.py\0"), 101: ("pt_data_worker", SPAWN_CMDLINE)})
    tm = kineto_manager(tmp_path, proc, [poll(100, 50), poll(101, 100, 50)])
    r = tm.start(TraceSpec(job_id="7", duration_ms=100, process_limit=1))
    assert set(r.matched_pids) == {100, 101}
    assert [v.pid for v in r.triggered] == [100]


def test_process_limit_picks_mp_spawn_trainers_over_launcher_and_workers(tmp_path: Path) -> None:
    # torch.multiprocessing.spawn: a launcher (100) that only waits, two trainers (101, 102: the same command line as
    # a DataLoader worker) and a DataLoader worker each (201, 202).
    proc = Proc(
        {
            100: ("python", b"python\0train.py\0"),
            101: ("python", SPAWN_CMDLINE),
            102: ("python", SPAWN_CMDLINE),
            201: ("pt_data_worker", SPAWN_CMDLINE),
            202: ("pt_data_worker", SPAWN_CMDLINE),
        }
    )
    polls = [poll(100, 50), poll(101, 100, 50), poll(102, 100, 50), poll(201, 101, 100, 50), poll(202, 102, 100, 50)]
    tm = kineto_manager(tmp_path, proc, polls)
    r = tm.start(TraceSpec(job_id="7", duration_ms=100, process_limit=2))
    assert [v.pid for v in r.triggered] == [101, 102]
    r = tm.start(TraceSpec(job_id="7", duration_ms=100, process_limit=3, pids=(100,)))
    assert [v.pid for v in r.triggered] == [100]  # the trainers are busy; then the launcher, before any helper
    assert set(r.busy_pids) == {101, 102}

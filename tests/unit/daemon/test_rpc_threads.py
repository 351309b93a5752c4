"""The Dyno server's RPC thread pool (dyno.daemon.rpc_threads): threads start as calls come, up to the bound, no
queued call waits while a thread is free, and threads end once idle, so a burst leaves no threads behind."""

from __future__ import annotations

import threading
from concurrent import futures

import pytest

from dyno.daemon.rpc_threads import RetiringThreadPool

from conftest import wait_for

pytestmark = pytest.mark.unit


def _pool_threads(prefix: str) -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith(prefix))


def test_a_burst_of_blocking_calls_gets_a_thread_each_up_to_the_bound_and_they_end_when_idle() -> None:
    pool = RetiringThreadPool(8, "burst", idle_s=0.2)
    release = threading.Event()
    running = threading.Semaphore(0)

    def call() -> int:
        running.release()
        release.wait(10)
        return 1

    calls = [pool.submit(call) for _ in range(12)]
    for _ in range(8):
        assert running.acquire(timeout=10)  # 8 run at once: the bound
    assert not running.acquire(timeout=0.2)  # the other 4 wait for a thread
    assert pool.threads == 8
    release.set()
    assert sum(f.result(10) for f in calls) == 12
    wait_for(lambda: _pool_threads("burst") == 0 and pool.threads == 0)  # idle threads ended


def test_calls_submitted_one_after_another_reuse_an_idle_thread() -> None:
    pool = RetiringThreadPool(8, "reuse", idle_s=5.0)
    names = set()
    for _ in range(20):
        names.add(pool.submit(lambda: threading.current_thread().name).result(10))
    assert len(names) <= 3  # a freed thread takes the next call (another may start while one is being freed)
    pool.shutdown()
    wait_for(lambda: _pool_threads("reuse") == 0)


def test_exceptions_reach_the_future_and_shutdown_refuses_new_work() -> None:
    pool = RetiringThreadPool(2, "errors", idle_s=5.0)

    def boom() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        pool.submit(boom).result(10)
    pool.shutdown()
    with pytest.raises(RuntimeError):
        pool.submit(lambda: None)
    wait_for(lambda: _pool_threads("errors") == 0)


def test_no_call_is_left_queued_while_threads_are_coming_free() -> None:
    pool = RetiringThreadPool(3, "churn", idle_s=0.05)  # threads retire about as fast as calls come
    done = [pool.submit(lambda i=i: i) for i in range(500)]
    assert sorted(f.result(10) for f in futures.as_completed(done, timeout=30)) == list(range(500))
    pool.shutdown()

"""The Dyno server's RPC threads: started as calls come, up to a bound, and ended after a while without work.

Why not concurrent.futures.ThreadPoolExecutor: its threads never end, so after one burst of calls (50 callers, or a
fan-out) dynod kept all RPC_THREADS of them for good, and a thread count that only grows hides the one that leaks.
grpc's sync server only calls `submit`. It is a ThreadPoolExecutor by type only (none of that class's own code runs):
grpc takes a handler's own pool (handler_slots.py) only if it is one.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent import futures
from typing import Any

__all__ = ["RetiringThreadPool"]


class RetiringThreadPool(futures.ThreadPoolExecutor):
    """At most `max_workers` daemon threads named `<thread_name_prefix>_<n>`; a thread that found no work for
    `idle_s` ends."""

    def __init__(self, max_workers: int, thread_name_prefix: str, *, idle_s: float = 30.0) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be >= 1")
        self._max = max_workers
        self._prefix = thread_name_prefix
        self._idle_s = idle_s
        self._cond = threading.Condition()
        self._work: deque[tuple[futures.Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = deque()
        self._live = 0
        self._waiting = 0  # threads in wait(), notified or not: each takes a queued item when it wakes
        self._started = 0
        self._shutdown = False

    @property
    def threads(self) -> int:
        with self._cond:
            return self._live

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> futures.Future[Any]:
        future: futures.Future[Any] = futures.Future()
        with self._cond:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._work.append((future, fn, args, kwargs))
            if self._waiting >= len(self._work):
                self._cond.notify()
            elif self._live < self._max:  # every waiting thread has an item already: one more thread
                self._live += 1
                self._started += 1
                name = f"{self._prefix}_{self._started}"
                threading.Thread(target=self._worker, name=name, daemon=True).start()
        return future

    def _worker(self) -> None:
        while True:
            with self._cond:
                while not self._work:
                    if self._shutdown:
                        self._live -= 1
                        return
                    self._waiting += 1
                    notified = self._cond.wait(self._idle_s)
                    self._waiting -= 1
                    if not notified and not self._work:
                        self._live -= 1
                        return
                future, fn, args, kwargs = self._work.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as e:
                future.set_exception(e)
            else:
                future.set_result(result)
            del future, fn, args, kwargs  # nothing of a finished call stays referenced while this thread idles

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No more submits; idle threads end (queued work still runs unless `cancel_futures`). `wait` is not
        honoured: the threads are daemon threads, and dynod's stop drains calls through grpc's grace."""
        with self._cond:
            self._shutdown = True
            if cancel_futures:
                while self._work:
                    self._work.popleft()[0].cancel()
            self._cond.notify_all()

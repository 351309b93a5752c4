"""A grpc.aio server on an event loop of its own thread, inside a daemon whose other parts are plain threads.

Why: grpc's sync server runs each RPC on a thread of its pool until the RPC ends, so each open stream holds a thread
(the Agent socket's Watch streams: one per registered trainer, for the trainer's whole life). On an event loop a
stream is a task waiting on its queue: a thousand cost memory, not a thousand threads, and none is left behind when
they end. The rest of dynod (registry, trace manager) stays threaded; this module holds the three joints:

- `LoopThread`: serves a grpc.aio server on its own thread; start() returns once it listens (or raises why not),
  stop() ends it from any thread.
- `WakingQueue`: a `queue.Queue` that other threads put into as before and that an async reader awaits
  (`next_item`), with no thread of its own and no polling.
- `SyncContext`: lets a plain handler written for the sync server (its refusals through `context.abort`) run on the
  event loop: abort raises `Refused`, which `refusing` turns into the aio context's abort.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Coroutine
from concurrent import futures
from typing import Any, Generic, NoReturn, TypeVar

import grpc

__all__ = ["LoopThread", "Refused", "SyncContext", "TIMED_OUT", "WakingQueue", "next_item", "refusing"]

T = TypeVar("T")
TIMED_OUT: Any = object()  # next_item's answer when nothing came within its timeout


class WakingQueue(queue.Queue[T], Generic[T]):
    """A queue.Queue whose every put also wakes its reader on `loop` (see next_item)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._loop = loop
        self.wake = asyncio.Event()

    def _put(self, item: T) -> None:  # queue.Queue's hook, under its mutex: a non-blocking call only
        super()._put(item)
        try:
            self._loop.call_soon_threadsafe(self.wake.set)
        except RuntimeError:  # the loop has closed (its server stopped): nobody is waiting
            pass


async def next_item(q: WakingQueue[T], timeout_s: float) -> T:
    """The next item of `q`, or TIMED_OUT after `timeout_s` without one. Call it on the queue's loop."""
    while True:
        try:
            return q.get_nowait()
        except queue.Empty:
            pass
        q.wake.clear()
        if not q.empty():  # put between the get and the clear: its wake-up was cleared, the item is there
            continue
        try:
            await asyncio.wait_for(q.wake.wait(), timeout_s)
        except asyncio.TimeoutError:
            return TIMED_OUT  # type: ignore[no-any-return]


class Refused(Exception):
    """A sync handler's abort, carried to the aio context (see SyncContext)."""

    def __init__(self, code: grpc.StatusCode, details: str, trailer: tuple[tuple[str, Any], ...] = ()) -> None:
        super().__init__(details)
        self.code = code
        self.details = details
        self.trailer = trailer  # its trailing metadata (the error's reason: dyno.daemon.rpc_abort)


class SyncContext:
    """An aio ServicerContext as a sync handler uses it: abort raises Refused; the rest (peer, metadata) is the aio
    context's."""

    def __init__(self, context: grpc.aio.ServicerContext) -> None:
        self._context = context
        self._trailer: tuple[tuple[str, Any], ...] = ()

    def set_trailing_metadata(self, metadata: tuple[tuple[str, Any], ...]) -> None:
        self._trailer = tuple(metadata)

    def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        raise Refused(code, details, self._trailer)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


async def refusing(handler: Callable[[Any, Any], T], request: Any, context: grpc.aio.ServicerContext) -> T:
    """`handler(request, SyncContext(context))` on the loop, its refusals as the aio context's aborts. For fast
    handlers only (no waiting): the loop serves every stream meanwhile."""
    try:
        return handler(request, SyncContext(context))
    except Refused as r:
        await context.abort(r.code, r.details, trailing_metadata=r.trailer)
        raise AssertionError("grpc.aio ServicerContext.abort returned") from None


class LoopThread:
    """Runs `serve(ready)` (a coroutine that builds and starts a grpc.aio server, calls `ready()` once it listens, and
    returns when stopped) on a new event loop in a daemon thread named `name`."""

    def __init__(self, name: str) -> None:
        self._name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None

    def start(
        self, serve: Callable[[Callable[[], None], asyncio.Event], Coroutine[Any, Any, None]], timeout_s: float = 30.0
    ) -> None:
        """Returns once `serve` called ready(); raises what `serve` raised before that."""
        loop = asyncio.new_event_loop()
        started: futures.Future[None] = futures.Future()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._main(serve, started))
            except BaseException as e:  # before ready: start() raises it; after: logged by the caller's serve
                if not started.done():
                    started.set_exception(e)
            finally:
                loop.close()

        thread = threading.Thread(target=run, name=self._name, daemon=True)
        thread.start()
        started.result(timeout_s)
        self.loop, self._thread = loop, thread

    async def _main(
        self,
        serve: Callable[[Callable[[], None], asyncio.Event], Coroutine[Any, Any, None]],
        started: futures.Future[None],
    ) -> None:
        self._stop = asyncio.Event()
        await serve(lambda: started.set_result(None), self._stop)

    def stop(self, timeout_s: float) -> None:
        """Tell `serve` to stop (its stop event), and wait up to `timeout_s` for the thread to end."""
        loop, thread, stop = self.loop, self._thread, self._stop
        if loop is None or thread is None or stop is None:
            return
        try:
            loop.call_soon_threadsafe(stop.set)
        except RuntimeError:  # the loop has ended already
            pass
        thread.join(timeout_s)
        self.loop = self._thread = None

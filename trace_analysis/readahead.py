"""Read one trace file ahead on a second thread while ``dyno-cli analyze`` imports numpy and the analysis stack.

Why: a ``dyno-cli analyze`` process is serial: ~0.1 s of imports, then the file's read, inflate and native
decode. The decode releases the GIL (``_native.c``), and the read and inflate mostly run in C, so started
before the imports they overlap them on a second core. The CLI calls ``start(path)`` when its paths name exactly
one trace file; ``traceload.load_trace`` calls ``claim(path, block_size)`` and, when that returns a
``ReadAhead``, iterates its ``batches()`` instead of opening the file itself.

Contract: ``batches()`` yields exactly what ``EventBatches.batches()`` yields, in order, and raises what it raises
at the same point (an exception raised on the thread is re-raised in the consumer after the batches before it),
so every result and error is the same with or without the read-ahead. The thread buffers at most ``bound``
bytes of batch JSON not yet consumed (with their decoded columns); past it, it stops and the consumer goes on
with the same iterator itself. Anything unexpected makes ``claim`` return None and the caller load the file
itself: the thread failed to open the file (the caller meets the same error), it has not opened it yet, a pipe
(which cannot be read twice), or a claim for another file. Nothing here imports numpy.
"""

from __future__ import annotations

import collections
import enum
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from dyno.trace_analysis.eventbatches import Batch, EventBatches
from dyno.trace_analysis.jsonscan import BLOCK_SIZE
from dyno.trace_analysis.traceopen import trace_size

__all__ = ["ReadAhead", "claim", "discard", "start"]

# Batch JSON held ahead of the consumer, at most. The imports last ~0.1 s, in which the thread decodes well under
# this; past them the consumer drains the buffer about as fast as the thread fills it, so the bound only caps
# the memory a slow consumer of a very large file could make it hold.
BOUND_BYTES = 64 << 20


class _State(enum.Enum):
    PENDING = "pending"  # the file is not open yet
    RUNNING = "running"  # the thread is iterating
    DONE = "done"  # the iteration ended (its end or an exception, kept in _error)
    HANDED_OVER = "handed over"  # the thread stopped early; the consumer goes on with the iterator
    UNAVAILABLE = "unavailable"  # the file could not be opened (or the read-ahead was cancelled first)


def _open_file(path: Path, block_size: int) -> EventBatches:
    size = trace_size(path)
    if size is None:  # a pipe: what the thread reads, no one could read again
        raise OSError(f"{path} is a pipe")
    return EventBatches(path, size, block_size)


class ReadAhead:
    """The batches of one file, iterated on a daemon thread from ``start_thread()``. ``open_source`` (on the thread)
    opens the file: any exception from it makes the read-ahead unavailable."""

    def __init__(
        self,
        path: Path,
        block_size: int = BLOCK_SIZE,
        bound: int = BOUND_BYTES,
        open_source: Callable[[], EventBatches] | None = None,
    ) -> None:
        self.path = path
        self.block_size = block_size
        self.source: EventBatches | None = None
        self._open = open_source or (lambda: _open_file(path, block_size))
        self._bound = bound
        self._cond = threading.Condition()
        self._state = _State.PENDING
        self._items: collections.deque[Batch] = collections.deque()
        self._held = 0  # batch bytes in _items
        self._error: BaseException | None = None
        self._cancelled = False
        self._iter: Iterator[Batch] | None = None
        self._thread = threading.Thread(target=self._run, name="dyno-readahead", daemon=True)

    def start_thread(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            source = self._open()
        except BaseException:  # noqa: BLE001 (the consumer opens the file itself and meets the error there)
            self._set_state(_State.UNAVAILABLE)
            return
        with self._cond:
            if not self._cancelled:
                self.source, self._iter = source, source.batches()
                self._state = _State.RUNNING
                self._cond.notify_all()
        if self._iter is None:
            source.close()
            self._set_state(_State.UNAVAILABLE)
            return
        try:
            while True:
                with self._cond:
                    if self._cancelled or self._held >= self._bound:
                        self._state = _State.HANDED_OVER
                        self._cond.notify_all()
                        return
                batch = next(self._iter)
                with self._cond:
                    self._items.append(batch)
                    self._held += len(batch.batch_bytes)
                    self._cond.notify_all()
                del batch
        except StopIteration:
            self._set_state(_State.DONE)
        except BaseException as e:  # noqa: BLE001 (re-raised in the consumer, where the direct iteration raises it)
            with self._cond:
                self._error = e
                self._state = _State.DONE
                self._cond.notify_all()

    def _set_state(self, state: _State) -> None:
        with self._cond:
            self._state = state
            self._cond.notify_all()

    def take(self) -> bool:
        """For the consumer: True when the file is open on the thread (then ``batches()`` and ``close()`` are the
        consumer's); else False, and the read-ahead is cancelled (the caller opens the file itself)."""
        with self._cond:
            if self._state in (_State.PENDING, _State.UNAVAILABLE):
                self._cancelled = True
                return False
            return True

    def batches(self) -> Iterator[Batch]:
        """What the thread buffered, then the rest: the thread's own, or the iterator's directly after a hand-over."""
        while True:
            with self._cond:
                while not self._items and self._state is _State.RUNNING:
                    self._cond.wait()
                if self._items:
                    batch = self._items.popleft()
                    self._held -= len(batch.batch_bytes)
                elif self._error is not None:
                    error, self._error = self._error, None
                    raise error
                elif self._state is _State.DONE:
                    return
                else:
                    break  # handed over
            yield batch
            del batch
        assert self._iter is not None  # (handed over only after the thread began the iteration)
        yield from self._iter

    def stop(self) -> BaseException | None:
        """Stop the thread and wait for it (one batch at most), the file left open; the exception its iteration
        ended in that the consumer has not met yet (None: none, or it stopped before)."""
        with self._cond:
            self._cancelled = True
        if self._thread.ident is not None:
            self._thread.join()
        return self._error

    def close(self) -> None:
        """The consumer is done: stop the thread, close the file."""
        self.stop()
        if self.source is not None:
            self.source.close()


_lock = threading.Lock()
_pending: ReadAhead | None = None


def start(path: Path, block_size: int = BLOCK_SIZE) -> ReadAhead | None:
    """Start reading ``path`` ahead; ``claim`` hands it to the load of that path. None where no thread can start
    (the load then reads the file itself)."""
    global _pending
    ahead = ReadAhead(path, block_size)
    with _lock:
        earlier, _pending = _pending, ahead
    if earlier is not None:
        _stop(earlier)
    try:
        ahead.start_thread()
    except RuntimeError:  # can't start new thread (a process or memory limit)
        discard(ahead)
        return None
    return ahead


def claim(path: Path, block_size: int) -> ReadAhead | None:
    """The read-ahead of ``path`` (read in blocks of ``block_size``), once, when its thread has the file open;
    None otherwise (the caller loads the file itself)."""
    global _pending
    with _lock:
        ahead = _pending
        if ahead is None or ahead.path != path or ahead.block_size != block_size:
            return None
        _pending = None
    return ahead if ahead.take() else None


def discard(ahead: ReadAhead) -> None:
    """Stop ``ahead`` if no load claimed it (the command failed before loading); nothing once claimed (its
    consumer closes it)."""
    global _pending
    with _lock:
        if _pending is not ahead:
            return
        _pending = None
    _stop(ahead)


def _stop(ahead: ReadAhead) -> None:
    if ahead.take():  # (else cancelled: the thread closes what it opens)
        ahead.close()


def _forget_in_child() -> None:
    # a forked child has no thread behind a read-ahead it inherited (a claim would wait on it for ever)
    global _pending, _lock
    _pending = None
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)

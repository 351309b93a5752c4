"""A cap on the live streams of one kind (StreamMetrics, FetchTraceFile, reflection), so they cannot take every
RPC thread of the server.

Why: a grpc sync server runs each RPC on one thread of its pool until the RPC ends, and a stream can last as long
as its client wants (a `--watch` view, a slow reader, an idle reflection session). Past the pool's size every other
call, health checks included, waits in the queue. A stream past its cap is refused at once with RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import threading

import grpc

from dyno.daemon.rpc_abort import abort

__all__ = [
    "MAX_FETCH_STREAMS",
    "MAX_METRIC_STREAMS",
    "MAX_REFLECTION_STREAMS",
    "RETRY_AFTER_KEY",
    "RPC_THREADS",
    "StreamSlots",
]

# The Dyno server's thread budget (app.py builds its pool with RPC_THREADS). Streams hold a thread for their whole
# life, unary calls for milliseconds and on a pool of their own (handler_slots.UNARY_THREADS): the caps below add up
# to 32 and leave 8 threads spare. tests/unit/daemon/test_stream_bounds.py checks the sum.
RPC_THREADS = 40
# `dyno-cli metrics --watch` sessions (a person's view; 16 is plenty on one host)
MAX_METRIC_STREAMS = 16
# FetchTraceFile: dyno-cli fetches at most 8 files at once by default (--fetch-concurrency), so one CLI never meets
# this cap; a refused fetch (several CLIs at once) is retried by the client (RETRY_AFTER_KEY): the streams share
# one disk and one NIC, so more at once would not move the files faster.
MAX_FETCH_STREAMS = 12
# grpc reflection sessions (grpcurl, debuggers): each is a bidi stream that holds its thread while the client idles
MAX_REFLECTION_STREAMS = 4

# Trailing metadata on a refusal that is worth retrying soon (the value: a first wait in ms). The client retries on
# it and only on it: other RESOURCE_EXHAUSTED answers (a limit the request itself exceeds) would fail again.
RETRY_AFTER_KEY = "dyno-retry-after-ms"


class StreamSlots:
    """At most `limit` live streams; `what` names them in the refusal ("live metric streams").
    `retry_after_ms`: when set, a refusal carries it as RETRY_AFTER_KEY trailing metadata."""

    def __init__(self, limit: int, what: str, *, retry_after_ms: int | None = None) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self.limit = limit
        self._what = what
        self._retry_after_ms = retry_after_ms
        self._slots = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self._open = 0

    @property
    def open(self) -> int:
        """Streams holding a slot now."""
        with self._lock:
            return self._open

    def take(self, context: grpc.ServicerContext) -> None:
        """Take a slot for the RPC of `context` until it ends, however it ends; refuse it (abort with
        RESOURCE_EXHAUSTED) when all are taken. Call it in the handler, before returning the response iterator."""
        if not self._slots.acquire(blocking=False):
            hint = ((RETRY_AFTER_KEY, str(self._retry_after_ms)),) if self._retry_after_ms is not None else ()
            abort(
                context,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{self.limit} {self._what} are already open on this daemon (its limit); retry shortly",
                metadata=hint,
            )
        with self._lock:
            self._open += 1
        # released by grpc when the RPC ends however it ends (a generator that never started has no finally to run)
        if not context.add_callback(self._release):
            self._release()  # already over

    def _release(self) -> None:
        with self._lock:
            self._open -= 1
        self._slots.release()

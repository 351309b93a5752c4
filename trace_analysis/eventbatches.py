"""The event batches of one trace file: its decompressed stream, the ``ScanResult`` the scan fills, and the batches
``jsonscan`` yields, each with the per-batch state ``traceload`` reads from the result when it comes.

``traceload`` iterates it directly, or through ``readahead``, which runs the same iteration on a second thread
while ``dyno-cli analyze`` imports the analysis stack: so nothing here imports numpy (the decoders are
``eventdecode``'s, and ``jsonscan`` imports numpy only for its structural scan).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Any, NamedTuple

from dyno.trace_analysis.eventdecode import NativeBatch, decode_batch, decode_fast
from dyno.trace_analysis.jsonscan import ScanResult, iter_event_batches
from dyno.trace_analysis.traceopen import open_stream

__all__ = ["Batch", "EventBatches"]


class Batch(NamedTuple):
    """One yield of the scan: the decoded elements and the ``ScanResult`` fields that describe them."""

    items: list[Any] | NativeBatch  # native columns, Event structs, or orjson values
    arrays: int  # ScanResult.arrays: which traceEvents array the batch belongs to
    batch_bytes: bytes | bytearray | memoryview  # ScanResult.batch_bytes: the batch's raw JSON
    last_batch: bool  # ScanResult.last_batch: no batch of this array follows


class EventBatches:
    """The opened file (``open_stream``; its errors raise from the constructor) and its scan, started by
    ``batches()``, which may be called once. ``result`` holds the metadata and counts once the batches are done;
    ``fh`` is the decompressed stream (read on after a ScanError by ``check_gzip_rest``). Close it when done."""

    def __init__(self, path: Path, size: int | None, block_size: int) -> None:
        self.result = ScanResult()
        self._stack = contextlib.ExitStack()
        try:
            fh, size_hint = open_stream(path, size, self._stack)
            self._stack.enter_context(fh)
        except BaseException:
            self._stack.close()
            raise
        self.fh: IO[bytes] = fh
        self._size_hint = size_hint
        self._block_size = block_size

    def batches(self) -> Iterator[Batch]:
        result = self.result
        scan = iter_event_batches(self.fh, result, self._block_size, decode_batch, decode_fast, self._size_hint)
        for items in scan:
            batch = Batch(items, result.arrays, result.batch_bytes, result.last_batch)
            del items  # (the caller's del frees a batch before the next block is read)
            yield batch
            del batch

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> EventBatches:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

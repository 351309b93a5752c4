"""FetchTraceFile's chunks of a trace file, each with its checksum, and the cache of whole-file checksums."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dyno.daemon.tracing.trust import open_trace_file
from dyno.filechunks import checksum_of, new_digest

__all__ = ["MAX_CHUNK", "Chunk", "ChecksumCache", "iter_chunks"]

MAX_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class Chunk:
    data: bytes
    offset: int
    last: bool
    checksum: str = ""  # "xxh3_128:<hex>" (dyno.filechunks), on the last chunk
    total_size: int = 0  # on the first chunk
    filename: str = ""  # base name, on the first chunk


class ChecksumCache:
    """Checksums of complete (immutable) trace files, keyed by inode, size and mtime so a changed file misses.

    The first stream of a file hashes as it reads; later streams of the same file skip the hashing.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[int, int, int, int], str] = OrderedDict()
        self._max = max_entries

    @staticmethod
    def key(st: os.stat_result) -> tuple[int, int, int, int]:
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def get(self, st: os.stat_result) -> str:
        with self._lock:
            return self._entries.get(self.key(st), "")

    def put(self, st: os.stat_result, checksum: str) -> None:
        with self._lock:
            self._entries[self.key(st)] = checksum
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)


def iter_chunks(path: Path, chunk_size: int = MAX_CHUNK, cache: ChecksumCache | None = None) -> Iterator[Chunk]:
    """Stream a file in chunks of at most chunk_size (capped at 1 MiB), one chunk of look-ahead in memory."""
    chunk_size = max(1, min(chunk_size or MAX_CHUNK, MAX_CHUNK))
    with open_trace_file(path) as f:
        st = os.fstat(f.fileno())
        known = cache.get(st) if cache is not None else ""
        digest = None if known else new_digest()
        total = st.st_size
        offset = 0
        cur = f.read(chunk_size)
        first = True
        while True:
            nxt = f.read(chunk_size) if cur else b""
            if digest is not None:
                digest.update(cur)
            last = not nxt
            checksum = ""
            if last:
                checksum = known or checksum_of(digest)  # type: ignore[arg-type]
                if cache is not None and not known and offset + len(cur) == total:
                    cache.put(st, checksum)
            yield Chunk(
                data=cur,
                offset=offset,
                last=last,
                checksum=checksum,
                total_size=total if first else 0,
                filename=path.name if first else "",
            )
            if last:
                return
            offset += len(cur)
            cur, first = nxt, False

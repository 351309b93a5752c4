"""Open a trace file for the loader: what the path is (missing, a folder, a device, a pipe), and its decompressed
byte stream (plain or gzip; a pipe streamed as it comes), with the expected decompressed size when it is known.

``TraceLoadError`` is the loader's error for a file that cannot be loaded (raised here for what the path is, by
``traceload`` for its content).
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import os
import stat
import zlib
from pathlib import Path
from types import ModuleType
from typing import IO, Any, cast

from dyno.trace_analysis.jsonscan import BLOCK_SIZE

__all__ = ["TraceLoadError", "GZIP_ERRORS", "trace_size", "open_stream", "check_gzip_rest", "gunzip_small"]

# gzip inflate: python-isal's igzip (ISA-L, ~3x faster than zlib here) when installed (the "fast" extra), else the
# standard library. Both read the same streams; only the detail of a corrupt-stream message differs.
_GZIP: ModuleType = gzip
GZIP_ERRORS: tuple[type[BaseException], ...] = (EOFError, gzip.BadGzipFile, zlib.error)


def _member_decompressor() -> Any:
    """A decompressor of one gzip member (``decompress(data, max_length)``, ``eof``, ``unused_data``)."""
    return zlib.decompressobj(31)


try:
    from isal import igzip as _igzip
    from isal import igzip_lib as _igzip_lib
    from isal.isal_zlib import error as _isal_error

    _GZIP = _igzip
    GZIP_ERRORS = (*GZIP_ERRORS, cast("type[BaseException]", _isal_error))  # typed as an instance in isal

    def _member_decompressor() -> Any:
        return _igzip_lib.IgzipDecompressor(_igzip_lib.DECOMP_GZIP)

except ImportError:  # optional dependency
    pass

# errors for which Path.exists() is False: the file or a folder on its path is missing, a symlink loop
_NO_SUCH_FILE = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})


class TraceLoadError(Exception):
    """A trace file could not be loaded; ``path`` and ``reason`` say which and why."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


class _Prefixed(io.RawIOBase):
    """A stream's first bytes, already read, then the rest of the stream (a pipe cannot seek back to them)."""

    def __init__(self, head: bytes, rest: io.FileIO) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        return self._rest.readinto(b)

    def close(self) -> None:
        self._rest.close()
        super().close()


# what stat says a path is, for the kinds of file a trace cannot be (read, they never end or cannot be opened)
_NOT_A_FILE = (
    (stat.S_ISCHR, "a character device (such as /dev/zero or a terminal), not a trace file"),
    (stat.S_ISBLK, "a block device, not a trace file"),
    (stat.S_ISSOCK, "a socket, not a trace file"),
)


def trace_size(p: Path) -> int | None:
    """The size of the trace file ``p`` in bytes, None for a pipe; raises ``TraceLoadError`` for a path that is no
    readable trace file (missing, a folder, a device or socket, an empty file)."""
    try:
        st = p.stat()  # (one system call for what exists(), is_dir() and stat() asked in turn)
    except (OSError, ValueError) as e:
        if isinstance(e, OSError) and e.errno not in _NO_SUCH_FILE:
            raise
        raise TraceLoadError(p, "no such file") from None  # what Path.exists() says False to
    if stat.S_ISDIR(st.st_mode):
        raise TraceLoadError(p, "is a directory (use load_traces for a folder of ranks)")
    for is_kind, what in _NOT_A_FILE:
        if is_kind(st.st_mode):
            raise TraceLoadError(p, f"is {what}")
    size = st.st_size if stat.S_ISREG(st.st_mode) else None
    if size == 0:
        raise TraceLoadError(p, "empty file")
    return size


def open_stream(
    path: Path, size: int | None, stack: contextlib.ExitStack[Any] | None = None
) -> tuple[IO[bytes], int | None]:
    """The decompressed stream of a file of ``size`` bytes, and its expected decompressed size (a hint: gzip
    keeps only the last member's size, modulo 2**32). ``size`` None: a pipe (``/dev/stdin``, ``<(zcat t.json.gz)``),
    which can be neither reopened nor sized: it is streamed in blocks as a file is (read whole, it would have no
    bound, and a signal could not stop the read). A file of at most a block is read whole, and inflated in one call when
    it fits in a block (``gunzip_small``). ``stack``: closes the pipe under a gzip reader (which leaves open a
    stream it was given)."""
    if size is None:
        pipe = open(path, "rb", buffering=0)
        head = b""
        while len(head) < 2:
            more = pipe.read(2 - len(head))
            if not more:
                break
            head += more
        if not head:
            pipe.close()
            raise TraceLoadError(path, "empty input")
        stream = io.BufferedReader(_Prefixed(head, pipe), BLOCK_SIZE)
        if head == b"\x1f\x8b":
            if stack is not None:
                stack.callback(stream.close)
            return cast(IO[bytes], _GZIP.open(stream, "rb")), None
        return stream, None
    with open(path, "rb") as fh:
        if size <= BLOCK_SIZE:  # a small file is read in one go (one read instead of three and a seek)
            head = data = fh.read()
        else:
            head, data = fh.read(2), b""
        if head[:2] == b"\x1f\x8b":
            hint = None
            if size >= 18:  # header and trailer
                if data:
                    hint = int.from_bytes(data[-4:], "little")
                else:
                    fh.seek(-4, os.SEEK_END)
                    hint = int.from_bytes(fh.read(4), "little")
            whole = gunzip_small(data, hint)
            if whole is not None:
                return io.BytesIO(whole), len(whole)
            # (a small file already read streams from memory: it is not read again)
            return cast(IO[bytes], _GZIP.open(io.BytesIO(data) if data else path, "rb")), hint
        if data:
            return io.BytesIO(data), len(data)
    return open(path, "rb"), size


# how much more of a gzip stream is inflated, after its JSON failed, to reach the checksum at its end
_GZIP_CHECK_BYTES = 1 << 30


def check_gzip_rest(fh: IO[bytes]) -> None:
    """Read a gzip stream on to its end (at most ``_GZIP_CHECK_BYTES``), so that a corrupt stream raises its gzip
    error (a CRC mismatch) rather than the invalid JSON its damaged bytes inflated to; nothing for other streams."""
    if not isinstance(fh, gzip.GzipFile):  # (isal's reader is one too)
        return
    left = _GZIP_CHECK_BYTES
    while left > 0:
        n = len(fh.read(BLOCK_SIZE))
        if not n:
            return
        left -= n


def gunzip_small(data: bytes, hint: int | None) -> bytes | None:
    """The decompressed bytes of a small gzip file (``data``, its whole content) said to hold less than a block,
    in one call into a buffer of that size (the streaming reader's Python layers and buffer growth cost about a
    tenth of a small trace's load); None to let the streaming reader do it: a file larger than ``hint`` (several
    members: gzip keeps only the last one's size), with data after its member, truncated or corrupt (the streaming
    reader then reports it as for any file)."""
    if not data or hint is None or hint >= BLOCK_SIZE:
        return None
    d = _member_decompressor()
    try:
        out: bytes = d.decompress(data, hint + 1)
    except GZIP_ERRORS:
        return None
    return out if d.eof and not d.unused_data else None

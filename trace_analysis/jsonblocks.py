"""Read a JSON byte stream in blocks, and find its structure in each block with numpy (no parser).

``structure`` gives the positions of the brackets outside strings of a block (unescaped quotes, backslash runs)
and their nesting deltas; ``read_blocks`` cuts the stream so that no backslash run crosses two blocks, which keeps
that escape detection local to one block. Used by ``jsonscan``. numpy is imported by ``structure`` only, when a
block needs the scan: the fast path (``jsonscan``'s speculative cuts) does not, and ``dyno-cli analyze``'s
read-ahead runs the loader on a second thread while the main thread imports numpy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["BLOCK_SIZE", "FIRST_BLOCK_SIZE", "structure", "read_blocks", "first_block_size"]

# 1 MiB: small enough that one block's Python objects stay in cache and cheap to free (8 MiB was 3x slower)
BLOCK_SIZE = 1 << 20
FIRST_BLOCK_SIZE = 1 << 16

_QUOTE, _BSLASH = 34, 92


def structure(buf: bytes, in_string: bool) -> tuple[np.ndarray, np.ndarray, bool]:
    """Positions of structural brackets outside strings in ``buf`` and their +1/-1 deltas; string state at end.

    Assumes no backslash run crosses the start of ``buf`` (the reader never ends a block on a backslash).
    """
    import numpy as np

    a = np.frombuffer(buf, dtype=np.uint8)
    q = np.flatnonzero(a == _QUOTE)
    if len(q):
        bs = np.flatnonzero(a == _BSLASH)
        if len(bs):
            # runs of consecutive backslashes; a quote right after an odd-length run is escaped
            brk = np.flatnonzero(np.diff(bs) != 1)
            run_start = np.concatenate(([bs[0]], bs[brk + 1]))
            run_end = np.concatenate((bs[brk], [bs[-1]]))
            j = np.searchsorted(run_end, q - 1)
            j_ok = j < len(run_end)
            jj = np.where(j_ok, j, 0)
            escaped = j_ok & (run_end[jj] == q - 1) & (((run_end[jj] - run_start[jj] + 1) & 1) == 1)
            q = q[~escaped]
    pos = np.flatnonzero((a == 123) | (a == 91) | (a == 125) | (a == 93))
    if len(pos):
        # inside a string iff an odd number of unescaped quotes precede it (plus the carried state)
        k = np.searchsorted(q, pos) + (1 if in_string else 0)
        pos = pos[(k & 1) == 0]
    delta = np.where((a[pos] == 123) | (a[pos] == 91), 1, -1).astype(np.int64)
    end_in_string = in_string ^ bool(len(q) & 1)
    return pos, delta, end_in_string


def read_blocks(fh: IO[bytes], block_size: int, first_size: int) -> Iterator[tuple[bytes, bool]]:
    """(block, last) pairs, then ``(b"", True)`` (lets the caller flush bytes it held back). ``last``: the read came
    back short, so the stream is at its end (buffered files and gzip readers fill a read unless at the end; a
    stream that does not only misses the fast end cut). No block is read ahead: the one being decoded is the one
    just inflated, still in the CPU cache."""
    size = first_size
    while True:
        block = fh.read(size)
        if not block:
            break
        last = len(block) < size
        size = block_size
        # never end a block inside a backslash run (keeps escape detection local to one block)
        while block.endswith(b"\\"):
            more = fh.read(1)
            if not more:
                break
            block += more
        yield block, last
    yield b"", True


def first_block_size(block_size: int, size_hint: int | None) -> int:
    """The first block is small: it holds the metadata and the start of the events array, and when the array
    cannot be found without the scan, only this block goes through it. A file said to fit in one block is read
    whole (a wrong hint only moves where blocks end)."""
    first = min(block_size, FIRST_BLOCK_SIZE)
    if size_hint is not None and size_hint < block_size:
        return max(size_hint + 1, first)
    return first

"""Split a Chrome-trace JSON byte stream into batches of ``traceEvents`` elements, without parsing it whole.

Why: ``orjson.loads`` of a whole multi-GB trace holds every event as Python dicts (~1 KB each) at once. Here the
decompressed bytes are read in blocks; a vectorized structural scan (numpy over the block: unescaped quotes,
brackets outside strings, nesting depth) finds the byte ranges of the array elements, and each batch of whole
elements is parsed by orjson on its own and handed to the caller, which turns it into columns and drops it.
Everything outside the ``traceEvents`` array (the metadata) is collected and parsed once at the end.

Fast split: inside the array, at an element boundary, a block is first cut speculatively after its last ``},``
and the cut handed to the caller's ``fast_decode``. That is safe without scanning: the cut starts at a true
element boundary, so ``[`` + cut + ``]`` is valid JSON only if the cut also ends at one (a cut inside a string or
a nested value leaves it unterminated or unbalanced). When ``fast_decode`` declines (returns None: invalid JSON,
a cut inside an element, or content it does not handle), the block goes through the structural scan as before.

Accepts ``{"traceEvents": [...], ...}`` (any key order) and the bare JSON-array form ``[...]``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Sized
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import orjson

from dyno.trace_analysis.jsonerrors import after_document_reason, byte_of_char, invalid_element_reason, not_json_reason

__all__ = ["ScanError", "ScanResult", "iter_event_batches", "BLOCK_SIZE", "FIRST_BLOCK_SIZE", "MAX_ELEMENT_BYTES"]

logger = logging.getLogger(__name__)

# 1 MiB: small enough that one block's Python objects stay in cache and cheap to free (8 MiB was 3x slower)
BLOCK_SIZE = 1 << 20
FIRST_BLOCK_SIZE = 1 << 16
# The largest traceEvents element, and the largest metadata outside the array, a load accepts (64 MiB: a Kineto
# event is well under 1 MiB). A partial element is held whole until it ends, so a file made of one endless value
# (a planted string of hundreds of MB, a few MB gzipped) is refused after reading this much of it, and costs about
# three times it in memory at most, instead of growing with the file.
MAX_ELEMENT_BYTES = 64 << 20

_QUOTE, _BSLASH = 34, 92
_OPEN = (123, 91)  # { [
_CLOSE = (125, 93)  # } ]
_WS = b" \t\r\n"
_KEY = b'"traceEvents"'
_NOT_WS = re.compile(rb"[^ \t\r\n]")
_EVENTS_OPEN = re.compile(rb'"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[')


class ScanError(ValueError):
    """The byte stream is not a well-formed Chrome trace (message says what is wrong)."""


@dataclass
class ScanResult:
    """Filled in while iterating: the top-level object without its traceEvents array, and counts."""

    meta: dict[str, Any] | None = None
    found_events: bool = False
    n_elements: int = 0
    n_bytes: int = 0
    # raw JSON of the batch being yielded (lets callers skip absent keys cheaply and re-read a few elements)
    batch_bytes: bytes | bytearray | memoryview = b""
    last_batch: bool = False  # the batch being yielded ends the events array (no batch follows)
    # traceEvents arrays begun so far: a repeated key's value replaces the earlier one (JSON.parse and Python's json
    # keep the last), so the caller drops the events it has when this grows
    arrays: int = 0
    # the last traceEvents value, when it came in the metadata after the streamed array (not streamed itself)
    last_value: Any = None


def _structure(buf: bytes, in_string: bool) -> tuple[np.ndarray, np.ndarray, bool]:
    """Positions of structural brackets outside strings in ``buf`` and their +1/-1 deltas; string state at end.

    Assumes no backslash run crosses the start of ``buf`` (the reader never ends a block on a backslash).
    """
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


def _read_blocks(fh: IO[bytes], block_size: int, first_size: int) -> Iterator[tuple[bytes, bool]]:
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


def _ends_with_key(meta: bytes | bytearray, buf: bytes, lo: int, p: int) -> bool:
    """Whether the text ``meta + buf[lo:p]`` ends with ``"traceEvents"`` and a colon (JSON whitespace around it).
    Reads only its end: a window that grows while it holds nothing but whitespace (copying all the text before each
    bracket of the metadata would make a metadata of many arrays quadratic)."""
    n = 64
    while True:
        whole = n >= len(meta) + p - lo
        if p - n >= lo:
            tail = buf[p - n : p]
        else:
            tail = bytes(meta[max(0, len(meta) - (n - (p - lo))) :]) + buf[lo:p]
        t = tail.rstrip(_WS)
        if t.endswith(b":"):
            t = t[:-1].rstrip(_WS)
            if len(t) >= len(_KEY) or whole:
                return t.endswith(_KEY)
        elif t or whole:
            return False
        n *= 4


def _gap_check(gap: bytes | bytearray, gap_at: int, need_comma: bool, element_follows: bool) -> int:
    """Check the text ``gap`` (at file offset ``gap_at``) that lies between two elements, or between an element and
    the array's "[" or "]", outside the batches the scan decodes; return how many values it holds (scalars: the scan
    batches only objects and arrays). ``need_comma``: an element ends right before it; ``element_follows``: an
    element starts right after it (else the array ends). Raises ScanError at the first byte that is not JSON."""
    chars = gap.translate(None, _WS)
    if chars == (b"," if need_comma and element_follows else b""):  # the common case: one comma, or nothing
        return 0
    text = bytes(gap)
    head = b"["
    if need_comma:  # the comma after the previous element is JSON's own: "[0" stands for that element
        head = b"[0"
    tail = b"0]" if element_follows else b"]"  # and "0" for the element after
    try:
        values = orjson.loads(head + text + tail)
    except orjson.JSONDecodeError as e:
        at = gap_at + byte_of_char(head + text, e.pos) - len(head)
        raise ScanError(f"invalid JSON in traceEvents (at byte {max(at, gap_at)} of the file): {e.msg}") from None
    return len(values) - need_comma - element_follows


def _too_large(what: str, n: int) -> ScanError:
    cap = MAX_ELEMENT_BYTES
    limit = f"{cap >> 20} MiB" if cap % (1 << 20) == 0 else f"{cap} bytes"
    return ScanError(
        f"{what} larger than {limit} (at least {n} bytes, where a trace event is under 1 MiB): the file is corrupt "
        "or was not written by a profiler"
    )


def _check_meta(meta: bytearray) -> None:
    if len(meta) > MAX_ELEMENT_BYTES:
        raise _too_large("metadata outside traceEvents", len(meta))


def _first_block_size(block_size: int, size_hint: int | None) -> int:
    """The first block is small: it holds the metadata and the start of the events array, and when the array
    cannot be found without the scan, only this block goes through it. A file said to fit in one block is read
    whole (a wrong hint only moves where blocks end)."""
    first = min(block_size, FIRST_BLOCK_SIZE)
    if size_hint is not None and size_hint < block_size:
        return max(size_hint + 1, first)
    return first


def _events_start(block: bytes) -> int:
    """Index just past the ``[`` of the top-level ``"traceEvents": [`` in the first block of an object, found
    without the structural scan; -1 when that cannot be shown (the caller scans).

    Why it is safe: the text P before the first ``"traceEvents"`` is followed by ``"traceEvents":[]}`` and parsed.
    JSON lexing is deterministic, so the state after P is the same in the file. If P ended inside a string, the
    appended quote would close it and ``traceEvents`` would follow outside a string (invalid), unless P ends with
    a backslash (excluded); outside a string, ``"traceEvents": []}`` then ending the document is valid only at the
    key position of the root object. So a successful parse proves the key is the root's, as the scan would find.
    """
    k = block.find(_KEY)
    if k <= 0 or block[k - 1] == _BSLASH:
        return -1
    m = _EVENTS_OPEN.match(block, k)
    if m is None:
        return -1
    try:
        orjson.loads(block[:k] + b'"traceEvents":[]}')
    except orjson.JSONDecodeError:
        return -1
    return m.end()


def _array_end_cut(
    buf: bytes | bytearray,
    lo: int,
    meta: bytes | bytearray,
    fast_decode: Callable[[bytes | bytearray | memoryview], Sized | None],
) -> tuple[Sized, dict[str, Any], memoryview, bytes] | None:
    """The rest of an object's events array without the scan: ``buf[lo:]`` is ``[`` + every remaining element +
    ``]`` + the metadata after the array. Cut at the array's ``]``, the batch (a view of ``buf``, no copy) is
    decoded and the metadata completed and parsed: returns (decoded batch, metadata, batch, the text after the
    array), or None (the caller scans).

    Candidates are the ``]`` right after a ``}``, from the right. As for the fast cut, the batch is valid JSON only
    if its ``]`` closes the array (it starts at an element boundary); the rest must then complete the metadata as
    the scan would (and not hold a second traceEvents array, which the scan would read).
    """
    r = len(buf)
    for _ in range(4):  # the events' ] is nearly always the last or next to last ] of a file
        r = buf.rfind(b"]", lo, r)
        if r <= lo:
            return None
        j = r - 1
        while buf[j] in _WS:  # (no copy of buf: it holds the whole rest of the file)
            j -= 1
        if buf[j] != 125:  # }
            continue
        rest = bytes(buf[r + 1 :])
        if _KEY in rest:
            return None
        try:
            parsed = orjson.loads(bytes(meta) + rest)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(parsed, dict):
            return None
        batch = memoryview(buf)[lo : r + 1]
        items = fast_decode(batch)
        if items is None:
            batch.release()  # (a bytearray cannot be resized while a view of it exists)
            return None
        return items, parsed, batch, rest
    return None


def iter_event_batches(
    fh: IO[bytes],
    result: ScanResult,
    block_size: int = BLOCK_SIZE,
    decode: Callable[[bytes], Sized] = orjson.loads,
    fast_decode: Callable[[bytes | bytearray | memoryview], Sized | None] | None = None,
    size_hint: int | None = None,
) -> Iterator[Any]:
    """Yield the decoded traceEvents elements of each block (whatever ``decode`` returns: a list of values, or a
    sized batch object); fill ``result`` (meta at the end).

    ``decode`` parses the JSON array of one batch (a ValueError from it means invalid JSON); ``fast_decode``, if
    given, is tried first on speculative cuts (see the module docstring) and returns None to decline.
    ``size_hint``: the expected decompressed size, if known (a file that fits in one block is read in one go).
    Raises ScanError for non-JSON, wrong top-level shape, or a truncated stream.
    """
    depth = 0
    in_string = False
    root: int | None = None  # first byte of the root value
    ev_depth = -1  # depth inside the events array (elements open at this depth); -1 before/after it
    meta = bytearray()
    # bytes of a partial element (starts with its opening bracket); grown in place while the element goes on (a
    # copy per block would make one large element quadratic), and only the new bytes of each block are scanned
    carry = bytearray()
    carry_at = 0  # the file offset of carry[0]
    pending = b""  # bytes after the last fast cut (at array level, right after a comma)
    # what lies between two elements outside the batches the scan decodes (no parser sees it otherwise): its text,
    # the file offset of its start, and whether an element ends right before it
    gap, gap_at, need_comma = bytearray(), 0, False
    fast_misses = 0
    # the metadata, when the fast end cut parsed it (valid while nothing follows: len(meta) then still meta_len)
    meta_parsed: dict[str, Any] | None = None
    meta_len = -1
    end_tried = False  # the fast end cut declined the whole file already
    events_at = -1  # len(meta) after the traceEvents placeholder: meta's bytes from there are the file's last ones
    bom = 0
    blocks = _read_blocks(fh, block_size, _first_block_size(block_size, size_hint))
    for block, last in blocks:
        final = not block  # the rest must go through the scan (array end, trailing metadata)
        seg0 = 0  # where the scan's text starts in this block (past a bare array's "[")
        result.n_bytes += len(block)
        # (decoded batch, metadata, batch, text after it) when the rest of the array was taken without the scan
        end: tuple[Sized, dict[str, Any], memoryview, bytes] | None = None
        if root is None:
            if not block:
                continue
            if block.startswith(b"\xef\xbb\xbf"):  # UTF-8 byte-order mark (some editors/tools write one)
                block = block[3:]
                bom = 3
            first = _NOT_WS.search(block)  # (block.lstrip would copy the block)
            if first is None:
                continue
            root = block[first.start()]
            if root not in _OPEN:
                raise ScanError(not_json_reason(block[first.start() : first.start() + 20]))
            start = -1
            if root == 91:  # bare array of events
                ev_depth = 1
                result.found_events = True
                result.arrays = 1
                if fast_decode is not None:
                    start = first.start() + 1
                else:
                    seg0 = first.start() + 1
            elif fast_decode is not None and (start := _events_start(block)) > 0:
                # the array found without the scan: the metadata before it is kept as the scan keeps it
                meta += block[:start]
                meta += b"]"
                events_at = len(meta)
                ev_depth = 2
                result.found_events = True
                result.arrays = 1
                if last:  # the whole file in one block: its elements are decoded in place
                    end = _array_end_cut(block, start - 1, meta, fast_decode)
                    end_tried = end is None
            if start > 0 and end is None:
                # the elements go to the fast cut, with the next block at once (a small file is one batch)
                depth = ev_depth
                pending, block = block[start:], b""
                if not last:
                    block, last = next(blocks)
                    result.n_bytes += len(block)
        # fast cut, at an element boundary (a carried partial element, or after a comma at array level)
        if (
            end is None
            and fast_decode is not None
            and fast_misses < 3
            and ev_depth >= 0
            and not final
            and (carry and len(carry) <= block_size or not carry and depth == ev_depth and not in_string)
        ):
            # built in place, in one allocation: "[" + elements + "]" without further copies
            head = bytearray().join((b"[", carry or pending, block))
            if last and ev_depth == 2 and not end_tried:
                end = _array_end_cut(head, 0, meta, fast_decode)
            cut = head.rfind(b"},") if end is None else -1
            if cut > 0:
                tail = bytes(head[cut + 2 :])
                del head[cut + 2 :]
                head[cut + 1] = 93  # the comma after the last whole element becomes the closing "]"
                items = fast_decode(head)
                if items is not None:
                    fast_misses = 0
                    result.batch_bytes = head
                    result.n_elements += len(items)
                    yield items
                    del items
                    result.batch_bytes = b""
                    pending, carry = tail, bytearray()
                    depth, in_string = ev_depth, False
                    gap, need_comma = bytearray(), False  # the cut took the comma after its last element
                    continue
                fast_misses += 1  # three misses in a row: this file's layout does not suit the fast cut
            del head
        if end is not None:
            # the whole rest of the file: its elements and the metadata after them, without the scan
            items, meta_parsed, result.batch_bytes, rest = end
            meta += rest
            meta_len = len(meta)
            result.n_elements += len(items)
            result.last_batch = True
            yield items
            del items, end
            result.batch_bytes, result.last_batch = b"", False
            pending, carry = b"", bytearray()
            ev_depth, depth, in_string = -1, 0, False
            continue
        if pending:
            block = pending + block
            pending = b""
        if not block:
            continue
        # positions are in the text carry + block (the carry was scanned with the block it came in)
        buf = block
        base = len(carry)
        pos, delta, end_in_string = _structure(block, in_string)
        if base:
            pos += base
        depths_after = depth + np.cumsum(delta)
        depths_before = depths_after - delta
        in_string = end_in_string
        seg_start = seg0  # start of the not-yet-assigned part of buf
        at0 = result.n_bytes - len(block)  # the file offset of buf[0]
        batch_lo = -1
        batch_hi = -1
        n_el = 0
        if ev_depth < 0:
            # look for the traceEvents "[" at depth 1 (opening to depth 2)
            cand = np.flatnonzero((depths_before == 1) & (delta == 1) & (np.frombuffer(buf, np.uint8)[pos] == 91))
            for c in cand:
                p = int(pos[c])
                if _ends_with_key(meta, buf, seg_start, p):
                    meta += buf[seg_start : p + 1]
                    _check_meta(meta)
                    meta += b"]"  # metadata keeps an empty traceEvents array
                    events_at = len(meta)
                    seg_start = p + 1
                    ev_depth = 2
                    depth = 2
                    result.found_events = True
                    result.arrays += 1
                    result.n_elements = 0
                    gap, need_comma = bytearray(), False
                    sel = np.arange(len(pos)) > c
                    pos, delta, depths_before, depths_after = (
                        pos[sel],
                        delta[sel],
                        depths_before[sel],
                        depths_after[sel],
                    )
                    break
            else:
                meta += buf[seg_start:]
                _check_meta(meta)
                depth = int(depths_after[-1]) if len(pos) else depth
                continue
        # inside the events array: element opens at depth ev_depth -> ev_depth+1, closes back
        opens = pos[(depths_before == ev_depth) & (delta == 1)]
        closes = pos[(depths_after == ev_depth) & (delta == -1)]
        array_end = np.flatnonzero((depths_after == ev_depth - 1) & (delta == -1))
        limit = int(pos[array_end[0]]) if len(array_end) else base + len(buf)
        opens = opens[opens < limit]
        closes = closes[closes < limit]
        if carry:
            opens = np.concatenate(([0], opens))
            if not len(closes) and not len(array_end):
                # the carried element goes on past this block
                carry += block
                if len(carry) > MAX_ELEMENT_BYTES:
                    raise _invalid_carry(carry, carry_at) or _too_large("a traceEvents element", len(carry))
                depth = int(depths_after[-1]) if len(pos) else depth
                continue
            if len(closes) and closes[0] >= MAX_ELEMENT_BYTES:
                raise _invalid_carry(carry, carry_at) or _too_large("a traceEvents element", int(closes[0]) + 1)
        if len(closes):
            batch_lo = int(opens[0])
            batch_hi = int(closes[-1]) + 1
            n_el = len(closes)
        if not carry:  # what comes before this block's first element (or up to the array's end)
            first_el = int(opens[0]) if len(opens) else limit
            if not gap:
                gap_at = at0 + seg_start
            gap += buf[seg_start:first_el]
            if len(opens):
                result.n_elements += _gap_check(gap, gap_at, need_comma, True)
                gap, need_comma = bytearray(), False
            elif len(gap) > MAX_ELEMENT_BYTES:
                raise _too_large("text between two traceEvents elements", len(gap))
        if n_el:
            try:
                if batch_lo < base:  # starts with the carried element
                    result.batch_bytes = b"".join((b"[", carry, buf[: batch_hi - base], b"]"))
                else:
                    result.batch_bytes = b"[" + buf[batch_lo - base : batch_hi - base] + b"]"
                items = decode(result.batch_bytes)
            except ValueError as e:
                where = result.n_bytes - len(block) + batch_lo - base
                raise ScanError(
                    invalid_element_reason(result.batch_bytes, e, f"element near byte {where}", where - 1)
                ) from None
            result.n_elements += len(items)
            yield items
            del items
            result.batch_bytes = b""
        last_open = opens[opens >= batch_hi] if batch_hi >= 0 else opens
        if n_el:  # what comes after the batch, up to the next element or the array's end
            need_comma = True
            next_el = int(last_open[0]) if len(last_open) else limit
            gap, gap_at = bytearray(buf[batch_hi - base : next_el - base]), at0 + batch_hi - base
            if len(last_open):
                result.n_elements += _gap_check(gap, gap_at, need_comma, True)
                gap, need_comma = bytearray(), False
        if len(array_end):
            result.n_elements += _gap_check(gap, gap_at, need_comma, False)
            gap, need_comma = bytearray(), False
            # events array closed in this block: the rest is metadata again
            meta += buf[limit + 1 - base :]
            _check_meta(meta)
            carry = bytearray()
            ev_depth = -1
            depth = int(depths_after[-1])
            continue
        # partial element left at the end of the block
        carry = bytearray(buf[int(last_open[0]) - base :]) if len(last_open) else bytearray()
        carry_at = result.n_bytes - len(block) + int(last_open[0]) - base if len(last_open) else 0
        if len(carry) > MAX_ELEMENT_BYTES:
            raise _invalid_carry(carry, carry_at) or _too_large("a traceEvents element", len(carry))
        depth = int(depths_after[-1]) if len(pos) else depth
        del buf
    if root is None:
        raise ScanError(f"empty file (only whitespace, {result.n_bytes} bytes)" if result.n_bytes else "empty file")
    if carry or in_string or ev_depth >= 0 or depth != 0:
        # an unfinished value is a cut file only if its text is valid up to the end: bytes that are not JSON (a
        # stray quote or bracket) leave one unfinished too, and their place is what the user needs
        invalid = _invalid_carry(carry, carry_at) if carry else None
        if invalid is None and root == 123 and ev_depth < 0:
            invalid = _invalid_meta(meta, events_at, result.n_bytes, bom)
        if invalid is not None:
            raise invalid
        # the events read say how much of the file is there: a cut while the profiler wrote it, or a partial copy
        read = f" ({result.n_elements} whole events before the cut)" if ev_depth >= 0 else ""
        raise ScanError(f"truncated: JSON ends inside an unfinished value after {result.n_bytes} bytes{read}")
    if meta_parsed is not None and len(meta) == meta_len:
        result.meta = meta_parsed
    elif root == 123:
        try:
            parsed = orjson.loads(bytes(meta))
        except orjson.JSONDecodeError as e:
            raise ScanError(_meta_error(bytes(meta), e, events_at, result.n_bytes, bom)) from None
        if not isinstance(parsed, dict):
            raise ScanError("top-level JSON value is not an object")
        result.meta = parsed
        if result.found_events and _KEY in meta[events_at:]:
            _take_last_value(result, meta, events_at)
    else:
        result.meta = {}


_END_OF_DATA = "unexpected end of data"  # orjson's message for valid JSON that stops short


def _invalid_carry(carry: bytearray, carry_at: int) -> ScanError | None:
    """The error for a partial element ``carry`` (at file offset ``carry_at``) that the parser rejects before its
    end; None when its text is valid as far as it goes."""
    try:
        orjson.loads(carry)
    except orjson.JSONDecodeError as e:
        if e.msg != _END_OF_DATA:
            return ScanError(invalid_element_reason(carry, e, "element", carry_at))
    return None


def _invalid_meta(meta: bytearray, events_at: int, n_bytes: int, bom: int) -> ScanError | None:
    """As ``_invalid_carry``, for the metadata of a file that ends inside it."""
    try:
        orjson.loads(meta)
    except orjson.JSONDecodeError as e:
        if e.msg != _END_OF_DATA:
            return ScanError(_meta_error(bytes(meta), e, events_at, n_bytes, bom))
    return None


def _take_last_value(result: ScanResult, meta: bytearray, events_at: int) -> None:
    """When the metadata after the streamed array's placeholder (``[]`` ending at ``events_at``) holds another
    traceEvents key, which value JSON keeps: parsed again with the placeholder as null, the key's value is still
    null only if the placeholder is the last one (the streamed events stand)."""
    again = orjson.loads(bytes(meta[: events_at - 2]) + b"null" + bytes(meta[events_at:]))
    value = again.get("traceEvents")
    if value is not None:
        result.last_value = value
        result.n_elements = len(value) if isinstance(value, list) else 0


def _meta_error(meta: bytes, e: orjson.JSONDecodeError, events_at: int, n_bytes: int, bom: int) -> str:
    """The metadata's parse error with the file's byte offset: ``meta`` is the file without the traceEvents
    elements, so orjson's position (in characters of ``meta``) is not one in the file. Before the elements,
    meta's bytes are the file's (less a BOM); from ``events_at`` on, they are the file's last ones."""
    pos = byte_of_char(meta, e.pos)
    offset = n_bytes - (len(meta) - pos) if 0 <= events_at <= pos else pos + bom
    if e.msg == "unexpected content after document":
        return after_document_reason(meta[pos:], offset)
    return f"invalid JSON outside traceEvents at byte {offset}: {e.msg}"

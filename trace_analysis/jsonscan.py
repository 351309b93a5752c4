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
from typing import IO, Any

import msgspec
import orjson

from dyno.trace_analysis.jsonblocks import BLOCK_SIZE, FIRST_BLOCK_SIZE, first_block_size, read_blocks, structure
from dyno.trace_analysis.jsonelements import check_meta, gap_check, invalid_carry, too_large
from dyno.trace_analysis.jsonerrors import ScanError, invalid_element_reason, not_json_reason
from dyno.trace_analysis.jsonmeta import (
    KEY,
    array_end_cut,
    ends_with_key,
    events_start,
    invalid_meta,
    last_value,
    meta_error,
)

__all__ = ["ScanError", "ScanResult", "iter_event_batches", "BLOCK_SIZE", "FIRST_BLOCK_SIZE", "MAX_ELEMENT_BYTES"]

logger = logging.getLogger(__name__)

# The largest traceEvents element, and the largest metadata outside the array, a load accepts (64 MiB: a Kineto
# event is well under 1 MiB). A partial element is held whole until it ends, so a file made of one endless value
# (a planted string of hundreds of MB, a few MB gzipped) is refused after reading this much of it, and costs about
# three times it in memory at most, instead of growing with the file.
MAX_ELEMENT_BYTES = 64 << 20

_OPEN = (123, 91)  # { [
_NOT_WS = re.compile(rb"[^ \t\r\n]")


class ScanResult(msgspec.Struct):
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
    cap = MAX_ELEMENT_BYTES  # (read at each call, so that a lowered cap applies)
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
    blocks = read_blocks(fh, block_size, first_block_size(block_size, size_hint))
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
            elif fast_decode is not None and (start := events_start(block)) > 0:
                # the array found without the scan: the metadata before it is kept as the scan keeps it
                meta += block[:start]
                meta += b"]"
                events_at = len(meta)
                ev_depth = 2
                result.found_events = True
                result.arrays = 1
                if last:  # the whole file in one block: its elements are decoded in place
                    end = array_end_cut(block, start - 1, meta, fast_decode)
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
                end = array_end_cut(head, 0, meta, fast_decode)
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
        import numpy as np  # (only here: the fast path runs without numpy; see jsonblocks)

        pos, delta, end_in_string = structure(block, in_string)
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
                if ends_with_key(meta, buf, seg_start, p):
                    meta += buf[seg_start : p + 1]
                    check_meta(meta, cap)
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
                check_meta(meta, cap)
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
                if len(carry) > cap:
                    raise invalid_carry(carry, carry_at) or too_large("a traceEvents element", len(carry), cap)
                depth = int(depths_after[-1]) if len(pos) else depth
                continue
            if len(closes) and closes[0] >= cap:
                raise invalid_carry(carry, carry_at) or too_large("a traceEvents element", int(closes[0]) + 1, cap)
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
                result.n_elements += gap_check(gap, gap_at, need_comma, True)
                gap, need_comma = bytearray(), False
            elif len(gap) > cap:
                raise too_large("text between two traceEvents elements", len(gap), cap)
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
                result.n_elements += gap_check(gap, gap_at, need_comma, True)
                gap, need_comma = bytearray(), False
        if len(array_end):
            result.n_elements += gap_check(gap, gap_at, need_comma, False)
            gap, need_comma = bytearray(), False
            # events array closed in this block: the rest is metadata again
            meta += buf[limit + 1 - base :]
            check_meta(meta, cap)
            carry = bytearray()
            ev_depth = -1
            depth = int(depths_after[-1])
            continue
        # partial element left at the end of the block
        carry = bytearray(buf[int(last_open[0]) - base :]) if len(last_open) else bytearray()
        carry_at = result.n_bytes - len(block) + int(last_open[0]) - base if len(last_open) else 0
        if len(carry) > cap:
            raise invalid_carry(carry, carry_at) or too_large("a traceEvents element", len(carry), cap)
        depth = int(depths_after[-1]) if len(pos) else depth
        del buf
    if root is None:
        raise ScanError(f"empty file (only whitespace, {result.n_bytes} bytes)" if result.n_bytes else "empty file")
    if carry or in_string or ev_depth >= 0 or depth != 0:
        # an unfinished value is a cut file only if its text is valid up to the end: bytes that are not JSON (a
        # stray quote or bracket) leave one unfinished too, and their place is what the user needs
        invalid = invalid_carry(carry, carry_at) if carry else None
        if invalid is None and root == 123 and ev_depth < 0:
            invalid = invalid_meta(meta, events_at, result.n_bytes, bom)
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
            raise ScanError(meta_error(bytes(meta), e, events_at, result.n_bytes, bom)) from None
        if not isinstance(parsed, dict):
            raise ScanError("top-level JSON value is not an object")
        result.meta = parsed
        if result.found_events and KEY in meta[events_at:]:
            value = last_value(meta, events_at)
            if value is not None:
                result.last_value = value
                result.n_elements = len(value) if isinstance(value, list) else 0
    else:
        result.meta = {}
